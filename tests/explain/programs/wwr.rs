// write-write-read client: wwr HOST PORT ROUNDS before|coalesce|nodelay
use std::io::{BufWriter, Read, Write};
use std::net::TcpStream;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (host, port, rounds, mode) = (&args[1], &args[2], args[3].parse::<u32>().unwrap(), &args[4]);
    let stream = TcpStream::connect(format!("{}:{}", host, port)).expect("connect");
    if mode == "nodelay" {
        stream.set_nodelay(true).expect("set_nodelay");
    }
    let mut reader = stream.try_clone().expect("clone");
    let mut buffered = BufWriter::new(stream.try_clone().expect("clone"));
    let mut plain = stream;
    let mut buf = [0u8; 13];
    for _ in 0..rounds {
        if mode == "coalesce" {
            buffered.write_all(b"GET /i").unwrap();
            buffered.write_all(b"ndex.ht").unwrap();
            buffered.flush().unwrap();
        } else {
            plain.write_all(b"GET /i").unwrap();
            plain.write_all(b"ndex.ht").unwrap();
        }
        reader.read_exact(&mut buf).expect("reply");
    }
}
