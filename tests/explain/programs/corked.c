/* small requests held by TCP_CORK or MSG_MORE:
   PROGRAM HOST PORT ROUNDS cork|more|cork-fixed|more-fixed
   cork: TCP_CORK set once and never cleared; more: every request sent with MSG_MORE;
   cork-fixed: TCP_CORK cleared (and set again) after each request; more-fixed: the
   request's header with MSG_MORE, its last part without. Each request is 30 B (10 + 20),
   each reply 20 B. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int cork(int s, int on) {
    return setsockopt(s, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

int main(int argc, char **argv) {
    if (argc != 5) return 64;
    int rounds = atoi(argv[3]);
    const char *mode = argv[4];
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)atoi(argv[2]));
    inet_pton(AF_INET, argv[1], &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a)) return 1;
    int corked = strncmp(mode, "cork", 4) == 0, more = strncmp(mode, "more", 4) == 0;
    int fixed = strstr(mode, "-fixed") != NULL;
    if (corked) cork(s, 1);
    char head[10], body[20], buf[20];
    memset(head, 'h', sizeof head);
    memset(body, 'b', sizeof body);
    for (int i = 0; i < rounds; i++) {
        if (send(s, head, sizeof head, more ? MSG_MORE : 0) != 10) return 3;
        if (send(s, body, sizeof body, more && !fixed ? MSG_MORE : 0) != 20) return 3;
        if (corked && fixed) { cork(s, 0); cork(s, 1); }
        for (int got = 0; got < 20;) {
            ssize_t n = read(s, buf + got, 20 - got);
            if (n <= 0) return 2;
            got += (int)n;
        }
    }
    close(s);
    return 0;
}
