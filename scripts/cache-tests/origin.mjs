// The cache-tests.fyi suite's origin server, listening on 127.0.0.1 only.
//
//   node origin.mjs SUITE_DIR [PORT]
//
// SUITE_DIR is the unpacked http-cache-tests package; PORT defaults to 0 (any free port).
// Prints the suite's own line, `Listening on http://127.0.0.1:PORT/`, once it listens.
// The suite's server binds every interface; this launcher holds it to loopback.
import http from 'http'
import path from 'path'
import { pathToFileURL } from 'url'

const [suite, port = '0'] = process.argv.slice(2)
if (!suite) {
  console.error('usage: node origin.mjs SUITE_DIR [PORT]')
  process.exit(2)
}

const listen = http.Server.prototype.listen
http.Server.prototype.listen = function (wanted, ...rest) {
  return listen.call(this, Number(wanted), '127.0.0.1', ...rest)
}

// The server reads its settings the way `npm run server` passes them.
process.env.npm_package_config_protocol = 'http'
process.env.npm_package_config_port = port
process.env.npm_package_config_pidfile = '/dev/null'
await import(pathToFileURL(path.resolve(suite, 'server/server.mjs')).href)
