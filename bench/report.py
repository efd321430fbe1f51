"""`make bench`'s report: a goal's row, the markdown tables (core phases, each scenario's, the goals, the
profile) and the results section of bench/README.md they replace."""
from bench import scenarios


def goal(name, value, target, met):
    return {"goal": name, "value": value, "target": target, "met": bool(met) if value is not None else None}


def render_table(r):
    m = r["machine"]
    lines = [f"Run {r['date']} on {m['cpus']} × {m['cpu_model']}, {m['memory_gb']} GB, Linux {m['kernel']}, "
             f"Python {m['python']}, Tornado {m['tornado']}, SQLite {m['sqlite']}, {m['load_client']}; "
             f"{r['config']['connections']} connections, {r['config']['duration_s']} s × {r['config']['repeat']} "
             f"runs (medians){' — QUICK SMOKE RUN, not a measurement' if r['config']['quick'] else ''}. "
             f"Other processes used {r['other_load_cores']['mean']} cores on average (max "
             f"{r['other_load_cores']['max']}) during the runs"
             f"{': the machine was shared, figures are pessimistic' if r['other_load_cores']['max'] > 0.2 else ''}."]
    if "big_server" in r:
        lines += [""] + render_core(r)
    for scenario in scenarios.load(set(r.get("scenarios", {}))):
        result = r["scenarios"][scenario.NAME]
        lines += ["", f"### {scenario.TITLE}", ""] + (
            [f"Failed: `{result['scenario_error']}` (its traceback is in the run's log)."]
            if "scenario_error" in result else scenario.render(result))
    lines += ["", "| Goal | Value | Target | Met |", "|---|---:|---:|---|"]
    for g in r["goals"]:
        met = "n/a (endpoint missing)" if g["met"] is None else ("yes" if g["met"] else "**no**")
        value = "–" if g["value"] is None else g["value"]
        lines.append(f"| {g['goal']} | {value} | {g['target']} | {met} |")
    prof = r.get("inbound_profile")
    if prof:
        threads = prof.get("threads_percent", {})
        lines += ["", f"Inbound profile (py-spy, {prof['samples']} samples of the server's busy threads: "
                      f"{threads.get('event_loop')} % event loop, {threads.get('writer_process')} % writer process, "
                      f"{threads.get('reader_thread')} % reader thread), own time:", "",
                  "| Function | % |", "|---|---:|"]
        lines += [f"| `{t['function']}` | {t['percent']} |" for t in prof["top_own"][:12]]
    return "\n".join(lines)


def render_core(r):
    lines = ["| Scenario | Ceiling req/s | Parley req/s | Ratio | Parley p50 ms | Parley p99 ms | Ceiling p99 ms | "
             "Parley CPU ms/req | Parley cores (main) | Ceiling cores | Errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("inbound", "POST /v1/incoming_custom_channel_message"), ("contacts_create", "POST /v1/contacts"),
                       ("contacts_lookup", "GET /v1/contacts?phoneNumber= (1k contacts)")):
        x = r.get(key)
        if not x:
            lines.append(f"| {label} | – | not built yet | | | | | | | | |")
            continue
        c, p = x["ceiling"], x["parley"]
        lines.append(f"| {label} | {c['rps']:.0f} | {p['rps']:.0f} | {x['ratio']:.2f} | {p['p50_ms']:.1f} | "
                     f"{p['p99_ms']:.1f} | {c['p99_ms']:.1f} | {p['server_cpu_ms_per_request']:.2f} | "
                     f"{_cores(p)} | {c['server_cores']:.2f} | {p['non_2xx_or_socket_errors']} |")
    a = r["account_read"]
    lines.append(f"| GET /v1/account (reference) | | {a['rps']:.0f} | | {a['p50_ms']:.1f} | {a['p99_ms']:.1f} | | "
                 f"{a['server_cpu_ms_per_request']:.2f} | {_cores(a)} | | {a['non_2xx_or_socket_errors']} |")
    g = r.get("lookup_growth")
    lines += ["", "| Lookup growth | 1k contacts p50 ms | 1M contacts p50 ms | Growth | 1k p99 ms | 1M p99 ms |",
              "|---|---:|---:|---:|---:|---:|"]
    if g:
        for c, label in (("c32", "32 connections"), ("c1", "1 connection")):
            lines.append(f"| {label} | {g['small'][c]['p50_ms']:.2f} | {g['big'][c]['p50_ms']:.2f} | "
                         f"{g['big'][c]['p50_ms'] / g['small'][c]['p50_ms']:.2f} | {g['small'][c]['p99_ms']:.2f} | "
                         f"{g['big'][c]['p99_ms']:.2f} |")
    else:
        lines.append("| GET /v1/contacts not built yet | | | | | |")
    b = r["big_server"]
    peaks = " + ".join(f"{p['peak_rss_mb']} MB {p['name']}" for p in b["after_load"].get("processes", []))
    lines += ["", f"Memory with {b['messages_stored']:,} messages and {b['contacts_stored']:,} contacts stored "
                  f"(preloaded in {r['preload']['seconds']} s, database {r['preload']['db_mb']} MB): server RSS "
                  f"{b['after_start']['rss_mb']} MB after start, peak RSS (VmHWM) {b['after_load']['peak_rss_mb']} MB "
                  f"({peaks}) "
                  f"after the lookup and inbound load above."]
    return lines


def _cores(run):
    """Cores the server used: all its processes, and (in brackets) the event loop's process alone."""
    main = run.get("main_process_cores")
    return f"{run['server_cores']:.2f}" + (f" ({main:.2f})" if main is not None else "")


START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"


def write_readme_table(readme, results):
    text = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text:
        text += f"\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{START}\n{render_table(results)}\n{END}{tail}")
