// The tables of bench/cache-tests/compare.sh's report, in markdown on stdout.
//
//   node report.mjs SUITE_DIR NAME=FILE.json ...
//
// Each FILE.json is what scripts/cache-tests/run.mjs printed for the cache NAME
// ({suite, results: {id: {kind, result, detail}}}), or {error: "..."} when compare.sh could not
// run it. The suite's published results (SUITE_DIR/results/NAME.json, from upstream's CI, for
// older versions of the same caches) are classified the same way and shown as extra rows of the
// count table.
import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const [suite, ...pairs] = process.argv.slice(2)
if (!suite || pairs.length === 0) {
  console.error('usage: node report.mjs SUITE_DIR NAME=FILE.json ...')
  process.exit(2)
}
const load = async file => (await import(pathToFileURL(path.resolve(suite, file)).href)).default

// The suite's tests, as run.mjs loads them (kind and dependencies for the published results).
const suites = await load('tests/index.mjs')
suites.push(await load('tests/surrogate-control.mjs'))
const tests = new Map()
for (const s of suites) for (const t of s.tests) tests.set(t.id, t)

const COLUMNS = ['pass', 'fail', 'optimal', 'yes', 'no', 'setup', 'retry', 'dependency', 'other']
const BAD = new Set(['fail', 'setup', 'retry', 'harness']) // a problem in a required/optimal test
const ANSWERED = new Set(['pass', 'fail', 'optimal', 'yes', 'no'])

// run.mjs's classification, for a published (raw) result file, over the tests `ids` (those of
// the live run: a test the published file lacks counts as untested).
function classifyRaw (raw, ids) {
  const memo = {}
  const classify = id => {
    if (id in memo) return memo[id]
    const test = tests.get(id)
    const r = raw[id]
    let out
    if (r === undefined || test === undefined) out = 'untested'
    else if ((test.depends_on || []).some(d => !['pass', 'yes'].includes(classify(d)))) out = 'dependency'
    else if (r[0] === 'Setup') out = r[1] === 'retry' ? 'retry' : 'setup'
    else if (r === false) out = 'harness'
    else if ((test.kind || 'required') === 'check') out = r === true ? 'yes' : 'no'
    else if (r === true) out = 'pass'
    else out = test.kind === 'optimal' ? 'optimal' : 'fail'
    return (memo[id] = out)
  }
  return Object.fromEntries(ids.map(id => [id, { kind: tests.get(id).kind || 'required', result: classify(id) }]))
}

function counts (results) {
  const c = Object.fromEntries(COLUMNS.map(k => [k, 0]))
  for (const { result } of Object.values(results)) c[COLUMNS.includes(result) ? result : 'other']++
  return c
}

// A cache whose answers are mostly harness/setup/retry failures (or none at all) did not really
// take part: say so instead of showing its numbers as if they meant something.
function sanity (name, run) {
  if (run.error) return `${name} was not tested: ${run.error}`
  const all = Object.values(run.results)
  const answered = all.filter(r => ANSWERED.has(r.result)).length
  const broken = all.filter(r => ['harness', 'setup', 'retry'].includes(r.result)).length
  if (all.length === 0 || answered === 0) return `${name} answered no test at all (${all.length} results, none pass/fail/optimal/yes/no): its configuration or the harness is broken, its numbers mean nothing`
  if (broken > all.length / 4) return `${name}: ${broken} of ${all.length} tests ended in harness/setup/retry, which points at a broken setup rather than at the cache`
  return undefined
}

const runs = pairs.map(pair => {
  const at = pair.indexOf('=')
  const name = pair.slice(0, at)
  const file = pair.slice(at + 1)
  let run
  try {
    run = JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (e) {
    run = { error: `no readable result file ${file} (${e.message})` }
  }
  if (!run.error && !run.results) run = { error: `${file} has no results` }
  return { name, ...run }
})

const index = await load('results/index.mjs')
// The tests run against a proxy (browser-only ones are not).
const proxyTests = [...tests.values()].filter(t => !t.browser_only).map(t => t.id)
const published = (name, ids) => {
  const entry = index.find(e => e.file === `${name}.json`)
  if (!entry) return undefined
  const raw = JSON.parse(fs.readFileSync(path.resolve(suite, 'results', entry.file), 'utf8'))
  return { label: `${entry.name} ${entry.version}`, results: classifyRaw(raw, ids) }
}

const out = []
const warnings = runs.map(r => sanity(r.name, r)).filter(Boolean)
if (warnings.length) {
  out.push('## ⚠ Broken runs', '')
  for (const w of warnings) out.push(`- **${w}**`)
  out.push('')
}

out.push('## Counts', '')
out.push('Results as [cache-tests.fyi](https://cache-tests.fyi/) shows them: **fail** a required test failed; ' +
  '**optimal** an optimal test failed (a stored response could have been used); **yes**/**no** the answer of a ' +
  'check (neither is a failure); **setup** the test could not set itself up (the cache did not store or reuse what ' +
  'it needs); **retry** the cache retried a request; **dependency** a test this one needs did not pass; **other** ' +
  'harness failures and untested. *published*: upstream\'s results for an older version of that cache, ' +
  'classified the same way over the same tests (those it lacks count as other).', '')
out.push(`| cache | tests | ${COLUMNS.join(' | ')} |`)
out.push(`|---|--:|${COLUMNS.map(() => '--:').join('|')}|`)
for (const run of runs) {
  if (run.error) {
    out.push(`| ${run.name} | **not tested** |${COLUMNS.map(() => ' |').join('')}`)
  } else {
    const c = counts(run.results)
    out.push(`| **${run.name}** | ${Object.keys(run.results).length} | ${COLUMNS.map(k => c[k]).join(' | ')} |`)
  }
  const pub = published(run.name, run.error ? proxyTests : Object.keys(run.results))
  if (pub) {
    const c = counts(pub.results)
    out.push(`| *published: ${pub.label}* | | ${COLUMNS.map(k => `*${c[k]}*`).join(' | ')} |`)
  }
}
out.push('')

const tested = runs.filter(r => !r.error)
const row = (id, cells) => `| \`${id}\` | ${tests.get(id)?.kind || 'required'} | ${cells.join(' | ')} |`
const cell = r => (r === undefined ? '–' : BAD.has(r) ? `**${r}**` : r)

const ids = [...new Set(tested.flatMap(r => Object.keys(r.results)))].sort()
const problem = ids.filter(id => tested.some(r => {
  const x = r.results[id]
  return x && x.kind !== 'check' && BAD.has(x.result)
}))
out.push('## Required and optimal tests with a fail, setup, retry or harness result', '')
out.push(`${problem.length} tests. Each cell is that cache's result (bold: fail/setup/retry/harness).`, '')
out.push(`| test | kind | ${tested.map(r => r.name).join(' | ')} |`)
out.push(`|---|---|${tested.map(() => '---').join('|')}|`)
for (const id of problem) out.push(row(id, tested.map(r => cell(r.results[id]?.result))))
out.push('')

const missed = ids.filter(id => !problem.includes(id) &&
  tested.some(r => r.results[id]?.result === 'optimal'))
out.push('## Other optimal tests that some cache did not meet', '')
out.push(`${missed.length} more tests where at least one cache gave \`optimal\` (it did not reuse a response it could have reused).`, '')
out.push(`| test | kind | ${tested.map(r => r.name).join(' | ')} |`)
out.push(`|---|---|${tested.map(() => '---').join('|')}|`)
for (const id of missed) out.push(row(id, tested.map(r => cell(r.results[id]?.result))))
out.push('')

console.log(out.join('\n'))
