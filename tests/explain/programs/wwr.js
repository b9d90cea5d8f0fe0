// write-write-read client: node wwr.js HOST PORT ROUNDS before|coalesce|nodelay
const net = require("net");
const [host, port, rounds, mode] = process.argv.slice(2);
const s = net.connect({ host, port: Number(port) }, () => {
  if (mode === "nodelay") s.setNoDelay(true);
  let round = 0, got = 0;
  const ask = () => {
    if (mode === "coalesce") {
      s.cork();                 // Node buffers both writes and sends them in one writev
      s.write("GET /i");
      s.write("ndex.ht");
      s.uncork();
    } else {
      s.write("GET /i");
      s.write("ndex.ht");
    }
  };
  s.on("data", (d) => {
    got += d.length;
    while (got >= 13) {
      got -= 13;
      round += 1;
      if (round < Number(rounds)) ask(); else s.end();
    }
  });
  ask();
});
s.on("error", () => process.exit(2));
