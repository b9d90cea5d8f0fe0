// write-write-read client: go run wwr.go HOST PORT ROUNDS before|coalesce|nodelay|default
package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"strconv"
)

func main() {
	host, port, mode := os.Args[1], os.Args[2], os.Args[4]
	rounds, _ := strconv.Atoi(os.Args[3])
	conn, err := net.Dial("tcp", net.JoinHostPort(host, port))
	if err != nil {
		os.Exit(1)
	}
	defer conn.Close()
	tcp := conn.(*net.TCPConn)
	// Go sets TCP_NODELAY on every connection: "before" and "coalesce" turn Nagle back
	// on to show the stall and its fix; "default" keeps Go's default
	if mode == "before" || mode == "coalesce" {
		tcp.SetNoDelay(false)
	}
	if mode == "nodelay" {
		tcp.SetNoDelay(true)
	}
	var w io.Writer = conn
	var flush func() error
	if mode == "coalesce" {
		b := bufio.NewWriter(conn)
		w, flush = b, b.Flush
	}
	head, tail := []byte("GET /i"), []byte("ndex.ht")
	buf := make([]byte, 13)
	for i := 0; i < rounds; i++ {
		w.Write(head)
		w.Write(tail)
		if flush != nil {
			flush()
		}
		if _, err := io.ReadFull(conn, buf); err != nil {
			os.Exit(2)
		}
	}
}
