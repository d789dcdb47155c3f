"""PNG charts of results.json (matplotlib, Agg backend): one per section present."""

from __future__ import annotations

from pathlib import Path


def draw(results: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sections = results.get("sections", {})
    made = []
    cores = results.get("machine", {}).get("cores", "?")

    def title_tail(section: str) -> str:
        """The section's own size (a section rerun with ``--only`` keeps its mode), and the cores."""
        return f"({sections.get(section, {}).get('mode') or results.get('mode', '?')}, {cores} cores)"

    def save(fig, name: str) -> None:
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path.name)

    decode = sections.get("decode", {}).get("cases")
    if decode:
        fig, ax = plt.subplots(figsize=(9, 5))
        methods = [
            ("lakecdc", "decode_frame (exact)"),
            ("python_floor", "mapInArrow, nothing decoded"),
            ("from_json", "bare from_json"),
            ("try_parse_json", "try_parse_json"),
            ("from_json_variant", "from_json, VARIANT scalars (exact)"),
        ]
        width = 0.16
        for j, (key, label) in enumerate(methods):
            xs = [i + (j - 2) * width for i in range(len(decode))]
            ax.bar(xs, [c.get(f"{key}_msg_per_s") or 0 for c in decode], width, label=label)
        ax.set_xticks(range(len(decode)), [c["format"] for c in decode], rotation=15)
        ax.set_ylabel("messages / s")
        ax.set_title(f"Decode {title_tail('decode')}")
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize="small")
        save(fig, "decode.png")

    tables = sections.get("tables", {}).get("cases")
    if tables:
        fig, ax = plt.subplots(figsize=(7, 4))
        xs = [c["tables"] for c in tables]
        ax.plot(xs, [c["gold_seconds"] for c in tables], "o-", label="gold")
        ax.plot(xs, [c["naive_seconds"] for c in tables], "s--", label="naive MERGE per table")
        ax.plot(xs, [3 * tables[0]["gold_seconds"]] * len(xs), ":", color="grey", label="target: 3× 1 table")
        ax.set_xscale("log")
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel(f"tables ({tables[0]['changes']} changes in one batch)")
        ax.set_ylabel("seconds per batch")
        ax.set_title(f"Many tables {title_tail('tables')}")
        ax.legend()
        save(fig, "tables.png")

    apply_cases = sections.get("apply", {}).get("cases", [])
    scale_cases = sections.get("scale", {}).get("cases", [])
    bars = [(f"apply\n{c['rows']:,} rows", c) for c in apply_cases[:1]]
    bars += [(f"scale\n{c['rows']:,} rows", c) for c in scale_cases[1:]]
    if bars:
        fig, ax = plt.subplots(figsize=(7, 4))
        width = 0.38
        for j, (key, label) in enumerate((("gold_seconds", "gold"), ("naive_seconds", "naive foreachBatch MERGE"))):
            ax.bar([i + (j - 0.5) * width for i in range(len(bars))], [c[key] for _l, c in bars], width, label=label)
        ax.set_xticks(range(len(bars)), [label for label, _c in bars])
        ax.set_ylabel(f"seconds per batch ({bars[0][1]['changes']:,} changes)")
        ax.set_title(f"Apply and scale {title_tail('apply')}")
        ax.legend()
        save(fig, "apply_scale.png")

    latency = sections.get("latency", {}).get("cases")
    if latency and latency[0].get("histogram", {}).get("counts"):
        h = latency[0]["histogram"]
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(h["edges"][:-1], h["counts"], width=(h["edges"][1] - h["edges"][0]) or 0.1, align="edge")
        for q in ("p50", "p99"):
            if latency[0].get(f"{q}_seconds") is not None:
                ax.axvline(latency[0][f"{q}_seconds"], color="red" if q == "p99" else "black", linestyle="--", label=q)
        ax.set_xlabel("seconds from produce to visible in gold")
        ax.set_ylabel("messages")
        ax.set_title(f"Latency at {latency[0].get('rate_achieved')} msg/s {title_tail('latency')}")
        ax.legend()
        save(fig, "latency.png")

    memory = sections.get("memory", {}).get("timeline")
    if memory:
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot([p[0] for p in memory], [p[1] for p in memory], label="driver JVM RSS")
        ax.plot([p[0] for p in memory], [p[2] for p in memory], label="Python workers RSS (sum)")
        ax.axhline(4.0, color="grey", linestyle=":", label="target: driver < 4 GiB")
        for t, label in sections["memory"].get("marks", []):
            ax.axvline(t, color="lightgrey", linewidth=0.8)
            ax.text(t, ax.get_ylim()[1] * 0.95, label, fontsize=7, rotation=90, va="top")
        ax.set_xlabel("seconds into the run")
        ax.set_ylabel("GiB")
        ax.set_title(f"Memory {title_tail('memory')}")
        ax.legend(loc="upper left")
        save(fig, "memory.png")
    return made
