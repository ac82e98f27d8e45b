"""The benchmark harness's bookkeeping (bench/run_benchmarks.py and its harness_* modules): no timing is asserted here."""

import harness_report
import harness_stages

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def test_stage_table_sums_each_rule_from_the_benchmark_files(tmp_path):
    rows = {"train/base.tsv": (100.0, 90.0, 700.0), "train/large.tsv": (200.0, 180.0, 900.0),
            "score/clinical/base.masked.0.tsv": (10.0, 8.0, 500.0), "build_corpora.tsv": (5.0, 4.0, 300.0)}  # fmt: skip
    for rel, (wall, cpu, rss) in rows.items():
        path = tmp_path / "benchmarks" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + f"{wall}\t0:00:00\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")
    table = harness_stages.stage_table(tmp_path).set_index("stage")
    assert table.loc["train"].tolist() == [2, 300.0, 270.0, 900.0]
    assert table.loc["score"].tolist() == [1, 10.0, 8.0, 500.0]
    assert table.loc["build_corpora"].tolist() == [1, 5.0, 4.0, 300.0]
    assert list(table.index) == ["train", "score", "build_corpora"]  # by CPU time, largest first
    assert harness_stages.stage_table(tmp_path / "none").empty


def test_targets_compare_each_figure_with_issue_14s_bar():
    result = {
        "whole_process": {"whole_process_vs_authors": 19.9, "overhead_beyond_floor_s": 0.4},
        "scorer": [{"precision": "fp32", "roofline_share": 0.45}, {"precision": "bf16", "roofline_share": 0.5}],
        "memory": [{"peak_rss_mib": 800.0}, {"peak_rss_mib": 1001.0}],
        "default_run": {"run": {"wall_s": 600.0}, "table2_alpha_rerun": {"wall_s": 20.0}},
    }
    met = [ok for _, _, ok in harness_report.targets(result)]
    # 19.9x < 20x; bf16 reaches 50%; 0.4 s <= 1 s; 1001 > 1.25 x 800; 600 s <= 600 s; 20 s is not < 20 s
    assert met == [False, True, True, False, True, False]


def test_table_change_counts_cells_that_print_differently():
    import pandas as pd

    before = pd.DataFrame({"protocol": "corrected", "column": ["a", "a", "b"], "row": ["AUC", "Prec.", "AUC"],
                           "metric": ["auc", "precision", "auc"], "value": [0.6296, 61.24, 0.9],
                           "ci_low": [0.5, 50.0, 0.8], "ci_high": [0.7, 70.0, 1.0]})  # fmt: skip
    after = before.copy()
    after.loc[0, "value"] = 0.6299  # 0.630 either way (printed to 3 decimals)
    after.loc[1, "value"] = 61.26  # 61.2 -> 61.3 (percentages to 1 decimal)
    after.loc[2, "ci_low"] = 0.7  # the interval moves, the value does not
    change = harness_stages.table_change(before, after)
    assert change["cells"] == 3 and change["printed_cells_moved"] == 2
    assert abs(change["max_abs_change_auc"] - 0.0003) < 1e-12 and abs(change["max_abs_change_percent"] - 0.02) < 1e-12


def test_attention_kernels_give_the_same_energies(tmp_path):
    """bench/bench_attention.py runs both kernels on the same samples; their energies agree to float rounding."""
    import json

    import bench_attention

    out = tmp_path / "attention.json"
    bench_attention.main(["--models", "1x64", "--vocab", "300", "--samples", "6", "--patterns", "2", "--repeats", "1",
                          "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())
    assert [row["energy"] for row in rows] == ["masked", "normalized"]
    assert all(row["default_kernel"] == "sdpa" and row["max_abs_energy_diff"] < 1e-5 for row in rows)


def test_a_pool_reference_plays_the_target_with_its_own_split_as_membership():
    import neighbour_variants
    import pandas as pd

    manifest = pd.DataFrame({
        "sample_id": ["m1", "m2", "n1", "n2", "i1", "i2", "h1", "p1"],
        "role": ["member", "member", "nonmember", "nonmember", "nonmember", "nonmember", "member_heldin", "population"],
        "source": ["mimic", "mimic", "mimic", "mimic", "i2b2", "i2b2", "mimic", "i2b2"],
    })  # fmt: skip
    splits = pd.DataFrame({
        "sample_id": ["m1", "m2", "n1", "n2", "i1", "i2", "h1", "p1"] * 2,
        "reference": ["r0"] * 8 + ["r1"] * 8,
        "in": [True, False, True, False, True, False, False, False] + [False] * 8,
    })  # fmt: skip
    out = neighbour_variants.as_reference_target(manifest, splits, "r0").set_index("sample_id")["role"]
    # trained MIMIC samples are members whatever Base's role; untrained pool samples non-members; a
    # trained i2b2 sample and Base's held-in members leave; the population stays
    assert out.to_dict() == {"m1": "member", "m2": "nonmember", "n1": "member", "n2": "nonmember",
                             "i2": "nonmember", "p1": "population"}  # fmt: skip


def test_compare_results_finds_a_changed_cell_a_missing_file_and_ignores_pdf_dates_and_logs(tmp_path):
    import pandas as pd
    from compare_results import compare

    before, after = tmp_path / "before", tmp_path / "after"
    for folder, value, date in ((before, 0.5, b"D:2026"), (after, 0.5, b"D:2027")):
        (folder / "tables").mkdir(parents=True)
        (folder / "logs").mkdir()
        (folder / "tables" / "t.md").write_text("| a |\n")
        (folder / "logs" / "x.tsv").write_text(str(date))  # logs differ: left out
        (folder / "f.pdf").write_bytes(b"%PDF /CreationDate (" + date + b") body")
        pd.DataFrame({"auc": [value], "n": [3]}).to_parquet(folder / "m.parquet")
    assert compare(before, after) == ([], 3)
    pd.DataFrame({"auc": [0.6], "n": [3]}).to_parquet(after / "m.parquet")
    (after / "tables" / "new.csv").write_text("x\n")
    (after / "f.pdf").write_bytes(b"%PDF /CreationDate (D:2027) other body")
    lines, same = compare(before, after)
    assert same == 1 and lines == [
        "differs: f.pdf",
        "differs: m.parquet (values differ in ['auc'])",
        "only in after: tables/new.csv",
    ]
