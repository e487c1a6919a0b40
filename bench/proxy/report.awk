# Markdown tables from run.sh's .tsv: one table per scenario and a summary per worker count.
# awk -F'\t' -v scenarios="hit-1k ..." -v threads="1" -v proxies="nginx nginx-ofc sluice" -f report.awk results.tsv
#
# Fields of the 4th column: requests rps p50_ms p99_ms errors cpu_s origin_requests sluice_hits
# Proxies named sluice* are Sluice variants (sluice: memory tier; sluice-disk: large objects on
# the disk tier, sent with sendfile; sluice-pipe: sluice with pipelining to the origin); every
# variant gets a ratio to every nginx.

# The issues' targets, as sluice-variant/nginx requests per CPU second (0: none).
function target(v, s) {
    if (v == "sluice" || v == "sluice-pipe") return (s == "hit-1k" || s == "hit-16k") ? 1.3 : s == "hit-256k" ? 1.0 : s == "pass-1k" ? 1.2 : 0
    if (v == "sluice-disk") return s == "hit-4m" ? 1.0 : 0
    return 0
}
function ms(x) { return x < 1 ? sprintf("%.0f µs", x * 1000) : sprintf("%.2f ms", x) }
function pct(x) { return sprintf("%.1f%%", 100 * x) }
function ratio(a, b) { return b > 0 ? sprintf("%.2f×", a / b) : "—" }

NR == 1 { next }
{
    k = $1 SUBSEP $2 SUBSEP $3
    split($4, f, " ")
    n[k]++
    line[k, n[k]] = $4
    eff[k, n[k]] = f[6] > 0 ? f[1] / f[6] : 0
}

# The median round by req/CPU-s (the lower middle one for an even count).
function median(k,   i, j, t, m, idx) {
    m = n[k]
    for (i = 1; i <= m; i++) idx[i] = i
    for (i = 1; i <= m; i++)
        for (j = i + 1; j <= m; j++)
            if (eff[k, idx[j]] < eff[k, idx[i]]) { t = idx[i]; idx[i] = idx[j]; idx[j] = t }
    return line[k, idx[int((m + 1) / 2)]]
}

function spread(k,   i, lo, hi) {
    if (n[k] < 2) return ""
    lo = hi = eff[k, 1]
    for (i = 2; i <= n[k]; i++) { if (eff[k, i] < lo) lo = eff[k, i]; if (eff[k, i] > hi) hi = eff[k, i] }
    return sprintf(" (%d–%d)", lo, hi)
}

END {
    ns = split(scenarios, S, " ")
    nt = split(threads, T, " ")
    np = split(proxies, P, " ")
    warnings = ""
    for (ti = 1; ti <= nt; ti++) {
        t = T[ti]
        printf "## %d worker%s (nginx worker_processes %d, sluice --threads %d)\n\n", t, (t > 1 ? "s" : ""), t, t
        summary = ""
        for (si = 1; si <= ns; si++) {
            s = S[si]
            hit = s ~ /^hit/
            printf "### %s\n\n", s
            printf "| proxy | req/s | p50 | p99 | req/CPU-s | CPU-s | %s | errors |\n", (hit ? "served from cache" : "reached origin")
            printf "|---|---:|---:|---:|---:|---:|---:|---:|\n"
            delete E; delete R; delete L50; delete L99
            for (pi = 1; pi <= np; pi++) {
                p = P[pi]
                k = t SUBSEP s SUBSEP p
                if (!(k in n)) continue
                split(median(k), f, " ")
                req = f[1]; cpu = f[6]; origin = f[7]; mem = f[8]
                E[p] = cpu > 0 ? req / cpu : 0
                R[p] = f[2]; L50[p] = f[3]; L99[p] = f[4]
                share = hit ? 1 - origin / req : origin / req
                if (hit && share < 0.99) warnings = warnings sprintf("- %s %s (%d workers): only %s served from cache\n", p, s, t, pct(share))
                if (!hit && share < 0.99) warnings = warnings sprintf("- %s %s (%d workers): only %s reached the origin\n", p, s, t, pct(share))
                if (p ~ /^sluice/ && hit && mem < 0.99 * req)
                    warnings = warnings sprintf("- %s %s (%d workers): cache hits counted %d of %d requests\n", p, s, t, mem, req)
                if (f[5] > 0) warnings = warnings sprintf("- %s %s (%d workers): %d wrk errors (see KEEP_TMP=1 outputs)\n", p, s, t, f[5])
                printf "| %s | %d | %s | %s | **%d**%s | %.2f | %s | %d |\n", p, f[2], ms(f[3]), ms(f[4]), E[p], spread(k), cpu, pct(share > 1 ? 1 : share), f[5]
            }
            for (vi = 1; vi <= np; vi++) {
                v = P[vi]
                if (v !~ /^sluice/ || !(v in E)) continue
                for (pi = 1; pi <= np; pi++) {
                    p = P[pi]
                    if (p ~ /^sluice/ || !(p in E)) continue
                    printf "| **%s/%s** | %s | %s | %s | **%s** | | | |\n", v, p, ratio(R[v], R[p]), ratio(L50[v], L50[p]), ratio(L99[v], L99[p]), ratio(E[v], E[p])
                }
            }
            printf "\n"
            row = "| " s
            for (pi = 1; pi <= np; pi++) row = row sprintf(" | %d", E[P[pi]])
            for (vi = 1; vi <= np; vi++) {
                v = P[vi]
                if (v !~ /^sluice/) continue
                if ("nginx" in E) {
                    tg = target(v, s)
                    r = (v in E) && E["nginx"] > 0 ? E[v] / E["nginx"] : 0
                    row = row sprintf(" | %.2f× | %s | %s", r, (tg ? sprintf("≥ %.1f×", tg) : "—"), (tg ? (r >= tg ? "yes" : "**no**") : "—"))
                }
                if ("nginx-ofc" in E) row = row " | " ratio(E[v], E["nginx-ofc"])
            }
            summary = summary row " |\n"
        }
        printf "### Summary, %d worker%s: requests per CPU second\n\n", t, (t > 1 ? "s" : "")
        head = "| scenario"; rule = "|---"
        for (pi = 1; pi <= np; pi++) { head = head " | " P[pi]; rule = rule "|---:" }
        for (vi = 1; vi <= np; vi++) {
            v = P[vi]
            if (v !~ /^sluice/) continue
            if (index(" " proxies " ", " nginx ")) { head = head " | " v "/nginx | target | met"; rule = rule "|---:|---:|:-:" }
            if (index(" " proxies " ", " nginx-ofc ")) { head = head " | " v "/nginx-ofc"; rule = rule "|---:" }
        }
        printf "%s |\n%s|\n%s\n", head, rule, summary
    }
    if (warnings != "") printf "### Warnings\n\n%s\n", warnings
}
