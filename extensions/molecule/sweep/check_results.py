"""Recompute the sweep's CSV from the jsonl files, independently of the collection's code.

Usage: python3 check_results.py RUN_DIR. Exits non-zero naming the first mismatch.
Per-GPU throughput = tokens / duration / GPUs (GPUs = TP x PP; DP attention adds none),
interactivity = 1000 / mean TPOT, as docs/results.md says.
"""

import csv
import json
import math
import sys
from pathlib import Path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def close(left, right):
    return math.isclose(float(left), float(right), rel_tol=1e-9, abs_tol=1e-9)


def expected_row(record, tp):
    duration = record["duration"]
    return {
        "Throughput/GPU (tok/s)": (record["total_input_tokens"] + record["total_output_tokens"]) / duration / tp,
        "Output Throughput/GPU (tok/s)": record["total_output_tokens"] / duration / tp,
        "Input Throughput/GPU (tok/s)": record["total_input_tokens"] / duration / tp,
        "Mean Interactivity (tok/s/user)": 1000.0 / record["mean_tpot_ms"],
        "Mean TTFT (ms)": record["mean_ttft_ms"],
    }


def main(run_dir):
    run_dir = Path(run_dir)
    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    jsonl = sorted(run_dir.glob("*/mix_c*.jsonl"))
    if len(rows) != len(jsonl):
        sys.exit(f"CSV has {len(rows)} rows for {len(jsonl)} jsonl files")
    for row in rows:
        host, conc = row["Host"], int(row["Concurrency"])
        manifest = json.loads((run_dir / host / "manifest.json").read_text())
        argv = manifest["variants"][row["Variant"]]["argv"]
        tp = int(argv[argv.index("--tp-size") + 1])
        if int(row["GPUs"]) != tp:
            sys.exit(f"c{conc}: GPUs {row['GPUs']} != TP {tp}")
        lines = [line for line in (run_dir / host / f"mix_c{conc}.jsonl").read_text().splitlines() if line.strip()]
        record = json.loads(lines[-1])
        if int(row["Completed"]) != record["completed"] or record["completed"] != conc * 10:
            sys.exit(f"c{conc}: completed {row['Completed']} / {record['completed']} != {conc * 10}")
        for column, value in expected_row(record, tp).items():
            if not close(row[column], value):
                sys.exit(f"c{conc}: {column} is {row[column]}, recomputed {value}")
    if (run_dir / "throughput.png").read_bytes()[:8] != PNG_SIGNATURE:
        sys.exit("throughput.png is not a PNG")
    print(f"{len(rows)} rows match the jsonl; the plot is a PNG")


if __name__ == "__main__":
    main(sys.argv[1])
