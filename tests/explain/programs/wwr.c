/* write-write-read client: PROGRAM HOST PORT ROUNDS before|coalesce|nodelay */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 5) return 64;
    int rounds = atoi(argv[3]);
    const char *mode = argv[4];
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[2]));
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    if (strcmp(mode, "nodelay") == 0) {
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(s, (struct sockaddr *)&a, sizeof a)) return 1;
    char head[6] = "GET /i", tail[7] = "ndex.ht", buf[13];
    for (int i = 0; i < rounds; i++) {
        if (strcmp(mode, "coalesce") == 0) {
            struct iovec iov[2] = {{head, sizeof head}, {tail, sizeof tail}};
            if (writev(s, iov, 2) != 13) return 3;
        } else {
            if (write(s, head, sizeof head) != 6 || write(s, tail, sizeof tail) != 7) return 3;
        }
        for (int got = 0; got < 13;) {
            ssize_t n = read(s, buf + got, 13 - got);
            if (n <= 0) return 2;
            got += (int)n;
        }
    }
    close(s);
    return 0;
}
