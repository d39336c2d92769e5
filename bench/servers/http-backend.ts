/**
 * B4's backend: the smallest HTTP server, on every address of its namespace, answering 2 bytes.
 * Prints `LISTENING <port>` when ready. Run inside the backend's network namespace.
 */
import http from 'node:http';

const port = Number(process.env['PORT'] ?? 8080);
const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 });
  res.end('ok');
});
server.keepAliveTimeout = 60_000;
server.listen(port, '0.0.0.0', () => process.stdout.write(`LISTENING ${port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
