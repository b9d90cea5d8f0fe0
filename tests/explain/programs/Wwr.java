// write-write-read client: java Wwr HOST PORT ROUNDS before|coalesce|nodelay
import java.io.BufferedOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

public class Wwr {
    public static void main(String[] args) throws Exception {
        String mode = args[3];
        int rounds = Integer.parseInt(args[2]);
        try (Socket s = new Socket()) {
            if (mode.equals("nodelay")) {
                s.setTcpNoDelay(true);
            }
            s.connect(new java.net.InetSocketAddress(args[0], Integer.parseInt(args[1])));
            OutputStream raw = s.getOutputStream();
            OutputStream out = mode.equals("coalesce") ? new BufferedOutputStream(raw) : raw;
            InputStream in = s.getInputStream();
            byte[] head = "GET /i".getBytes(StandardCharsets.US_ASCII);
            byte[] tail = "ndex.ht".getBytes(StandardCharsets.US_ASCII);
            byte[] buf = new byte[13];
            for (int i = 0; i < rounds; i++) {
                out.write(head);
                out.write(tail);
                out.flush();
                int got = 0;
                while (got < 13) {
                    int n = in.read(buf, got, 13 - got);
                    if (n < 0) {
                        System.exit(2);
                    }
                    got += n;
                }
            }
        }
    }
}
