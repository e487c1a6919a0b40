// Runs the cache-tests.fyi suite against one HTTP cache and classifies each test the way
// cache-tests.fyi shows it.
//
//   node run.mjs SUITE_DIR BASE_URL [--raw FILE] [--id TEST_ID]
//
// BASE_URL is the cache under test, set up as a reverse proxy in front of `origin.mjs`.
// Prints one JSON object: { "suite": version, "results": { test id: { "kind", "result",
// "detail" } } }, where kind is the test's `required`, `optimal` or `check`, and result is
// one of `pass`, `fail` (a required test failed: likely a conformance problem), `optimal`
// (an optimal test failed: the cache could have used a stored response), `yes`/`no` (the
// answer of a check), `setup` (the test could not set up: the cache did not store or did
// not reuse what the test needs), `retry` (the cache retried a request), `harness` (the
// suite failed) or `dependency` (a test this one depends on did not pass).
// --raw FILE also writes the suite's own results (the format of its `results/` files).
// --id runs one test and prints its requests and responses on stderr.
import fs from 'fs'
import path from 'path'
import { createRequire } from 'module'
import { pathToFileURL } from 'url'

const args = process.argv.slice(2)
const option = name => {
  const at = args.indexOf(name)
  if (at < 0) return undefined
  const [, value] = args.splice(at, 2)
  return value
}
const rawFile = option('--raw')
const onlyId = option('--id')
const [suite, base] = args
if (!suite || !base) {
  console.error('usage: node run.mjs SUITE_DIR BASE_URL [--raw FILE] [--id TEST_ID]')
  process.exit(2)
}
const load = async file => (await import(pathToFileURL(path.resolve(suite, file)).href))
// node-fetch as the suite's cli.mjs finds it (installed next to the suite by install-deps).
const nodeFetch = createRequire(path.resolve(suite, 'cli.mjs')).resolve('node-fetch')
const fetch = (await import(pathToFileURL(nodeFetch).href)).default
const suites = (await load('tests/index.mjs')).default
// cli.mjs adds the Surrogate-Control tests to the index the same way.
suites.push((await load('tests/surrogate-control.mjs')).default)
const { runTests, getResults } = await load('client/runner.mjs')

const tests = new Map()
for (const s of suites) for (const t of s.tests) tests.set(t.id, t)

let chosen = suites
if (onlyId !== undefined) {
  const test = tests.get(onlyId)
  if (!test) {
    console.error(`no test ${onlyId}`)
    process.exit(2)
  }
  test.dump = true
  chosen = [{ ...suites.find(s => s.tests.includes(test)), tests: [test] }]
  // The dump goes to stdout in the suite; keep stdout for the JSON.
  console.log = (...parts) => console.error(...parts)
}
await runTests(chosen, fetch, false, base)
const raw = getResults()
if (rawFile) fs.writeFileSync(rawFile, JSON.stringify(raw, null, 2) + '\n')

// lib/display.mjs's determineTestResult, which needs a browser to import.
function classify (id) {
  const test = tests.get(id)
  const raw1 = raw[id]
  if (raw1 === undefined) return 'untested'
  for (const dependency of test.depends_on || []) {
    if (!['pass', 'yes'].includes(classify(dependency))) return 'dependency'
  }
  if (raw1[0] === 'Setup') return raw1[1] === 'retry' ? 'retry' : 'setup'
  if (raw1 === false) return 'harness'
  const kind = test.kind || 'required'
  if (kind === 'check') return raw1 === true ? 'yes' : 'no'
  if (raw1 === true) return 'pass'
  return kind === 'optimal' ? 'optimal' : 'fail'
}
const results = {}
for (const id of Object.keys(raw).sort()) {
  results[id] = {
    kind: tests.get(id).kind || 'required',
    result: classify(id),
    detail: raw[id] === true ? '' : raw[id].join(': ')
  }
}
const version = JSON.parse(fs.readFileSync(path.resolve(suite, 'package.json'))).version
// console.info, not console.log: with --id the dump took console.log over to stderr.
console.info(JSON.stringify({ suite: version, results }, null, 1))
