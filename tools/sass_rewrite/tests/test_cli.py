"""The command line."""
import pytest
from handmade import LISTING

from sass_rewrite import cli


def test_commands_parse():
    args = cli.parser().parse_args(["rewrite", "lib.so", "--out", "x.so", "--order", "walk24", "--conflict-weight", "0"])
    assert cli._options(args).to_dict() == {"order_from": "walk24", "beam": 32, "conflict_weight": 0,
                                            "per_bank": True, "reuse_on": True}
    assert cli.parser().parse_args(["banks", "k.sass"]).run is cli.cmd_banks
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["rewrite", "lib.so", "--out", "x.so", "--order", "spiral"])


def test_validated_takes_no_options():
    with pytest.raises(SystemExit, match="--validated takes each loop's options from the data"):
        cli.main(["rewrite", "lib.so", "--out", "x.so", "--validated", "--order", "rows"])


def test_banks_of_a_listing(tmp_path, capsys):
    path = tmp_path / "k.sass"
    path.write_text(LISTING)
    cli.main(["banks", str(path)])
    out = capsys.readouterr().out
    assert out.startswith("kernel\n") and "4 FFMA" in out
