"""``torch-studio summary | validate | import``: output, exit codes, and errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from graph_editor.model import Edge, load_graph, save_graph
from tests.graph_editor.graph_testing import ROOT, TEMPLATES, lenet_graph
from tests.studio.cli.in_process import run

pytestmark = pytest.mark.process

LENET = str(TEMPLATES / "lenet5.graph.json")


def test_summary_table(capsys):
    code, out, _ = run(capsys, "summary", LENET)
    assert code == 0
    header, rule, *rows = out.splitlines()
    assert header.split() == ["node", "type", "output", "params", "FLOPs", "activations"]
    assert any(r.split()[:4] == ["conv1", "Conv2d", "6x28x28", "156"] for r in rows)
    assert "total params 61,706" in out and "output 10" in out


def test_summary_json(capsys):
    code, out, _ = run(capsys, "summary", LENET, "--json", "--batch", "8")
    assert code == 0
    data = json.loads(out)
    assert data["total_params"] == 61_706
    assert data["output_shape"] == [8, 10]
    assert data["batch"] == 8
    assert data["total_flops"] == sum(n["flops"] for n in data["nodes"]) > 0
    conv1 = next(n for n in data["nodes"] if n["id"] == "conv1")
    assert conv1["shape"] == [8, 6, 28, 28] and conv1["params"] == 156


def test_summary_with_another_input_shape(capsys):
    code, out, _ = run(capsys, "summary", str(TEMPLATES / "resnet18_cifar.graph.json"), "--input-shape", "3,64,64",
                       "--json")
    assert code == 0 and json.loads(out)["total_params"] == 11_173_962
    code, _, err = run(capsys, "summary", LENET, "--input-shape", "1,8,8")
    assert code == 1 and "conv2" in err and "Traceback" not in err


def test_validate_ok_and_problems(capsys, tmp_path):
    assert run(capsys, "validate", LENET)[:2] == (0, "ok\n")
    g = lenet_graph()
    g.remove_edge(Edge("relu1", "pool1"))
    g.nodes["fc2"].params["out_features"] = -1
    path = tmp_path / "broken.graph.json"
    save_graph(g, path)
    code, _, err = run(capsys, "validate", str(path))
    assert code == 1
    assert "pool1.in: input 'in' is not connected" in err
    assert "fc2 [out_features]: out_features must be >= 1, got -1" in err
    assert "2 problem(s)" in err


def test_bad_files_exit_1_with_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.graph.json"
    bad.write_text('{"schema_version": 2, "nodes": [')
    for command in ("summary", "validate"):
        code, _, err = run(capsys, command, str(bad))
        assert code == 1 and err.startswith("error: ") and "truncated" in err and "Traceback" not in err
    code, _, err = run(capsys, "summary", str(tmp_path / "missing.graph.json"))
    assert code == 1 and "file not found" in err


NETS = textwrap.dedent('''
    import torch
    from torch import nn

    def mlp():
        return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def convnet():
        return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(8, 4))

    class Odd(nn.Module):
        def forward(self, x):
            return torch.sin(x).sum(1)

    def odd():
        return Odd()

    def broken():
        raise RuntimeError("factory failed")

    def not_a_module():
        return 42

    def exits():
        import sys
        sys.exit(0)

    class Sine(nn.Module):
        def forward(self, x):
            return torch.sin(x)

    def with_sine():
        return nn.Sequential(nn.Linear(4, 8), Sine(), nn.Linear(8, 3))
''')


@pytest.fixture
def nets_dir(tmp_path, monkeypatch):
    (tmp_path / "my_nets.py").write_text(NETS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_nets", None)


def test_import_writes_a_graph_and_weights(capsys, nets_dir):
    code, out, _ = run(capsys, "import", "my_nets:mlp", "-o", "mlp.graph.json", "--weights", "mlp.safetensors")
    assert code == 0 and "imported 5 nodes" in out
    graph = load_graph(nets_dir / "mlp.graph.json")
    assert graph.input_spec.shape == (64,) and graph.num_classes == 10  # both guessed from the module
    from safetensors.torch import load_file

    assert set(load_file(nets_dir / "mlp.safetensors")) == {"_0.weight", "_0.bias", "_2.weight", "_2.bias"}
    code, _, _ = run(capsys, "import", "my_nets:convnet", "-o", "conv.graph.json", "--input-shape", "3,16,16",
                     "--num-classes", "4")
    assert code == 0 and load_graph(nets_dir / "conv.graph.json").num_classes == 4


@pytest.mark.parametrize(("args", "words"), [
    (["my_nets:odd", "--input-shape", "4"], "receives scalar"),    # captured whole: its output is no logits
    (["my_nets:convnet"], "--input-shape"),
    (["my_nets:broken"], "factory failed"),
    (["my_nets:not_a_module"], "not a torch.nn.Module"),
    (["my_nets:nothing"], "has no function 'nothing'"),
    (["no_such_module:f"], "cannot import no_such_module"),
    (["my_nets"], "MODULE:FACTORY"),
    (["my_nets:exits"], "my_nets:exits() called sys.exit(0) instead of returning a module"),
    (["my_nets:convnet", "--input-shape", "3,16,16", "--num-classes", "7"], "Output expects logits of shape 7"),
])
def test_import_errors_exit_1_with_a_clear_message(capsys, nets_dir, args, words):
    code, _, err = run(capsys, "import", *args, "-o", "out.graph.json")
    assert code == 1 and words in err and "Traceback" not in err
    assert not (nets_dir / "out.graph.json").exists()


def test_import_weights_into_a_missing_folder_writes_nothing(capsys, nets_dir):
    for flags in (["--weights", str(nets_dir / "missing" / "w.safetensors")], ["-o", "gone/out.graph.json"]):
        args = ["import", "my_nets:mlp", "-o", "out.graph.json", *flags]
        code, _, err = run(capsys, *args)
        assert code == 1 and "does not exist" in err and "Traceback" not in err, err
        assert err.count("\n") == 1 and not (nets_dir / "out.graph.json").exists()


def test_console_entry_point_runs():
    done = subprocess.run([sys.executable, "-m", "studio", "validate", LENET], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n"


MLP_TEXT = (TEMPLATES / "mlp.graph.json").read_text()


@pytest.mark.parametrize("name", ["forward", "training", "__init__"])
def test_validate_refuses_node_ids_training_refuses(capsys, tmp_path, name):
    path = tmp_path / "net.graph.json"
    path.write_text(MLP_TEXT.replace('"fc1"', f'"{name}"'))
    code, out, err = run(capsys, "validate", str(path))
    assert code == 1 and out == "" and f"the id '{name}' is a name PyTorch modules reserve" in err, err


def test_validate_refuses_a_module_node_that_cannot_be_imported_here(capsys, nets_dir, monkeypatch):
    # Import keeps such a class as a Program node now; graph files written before hold Module nodes
    from graph_editor.model import Graph, InputSpec, save_graph

    g = Graph(InputSpec((4,)), 3, {"name": "with_sine"})
    g.chain(("Input", "input"), ("Linear", "fc1", {"out_features": 8}),
            ("Module", "sine", {"cls": "my_nets:Sine", "in_shape": [8], "out_shape": [8]}),
            ("Linear", "fc2", {"out_features": 3}), ("Output", "output"))
    save_graph(g, nets_dir / "odd.graph.json")
    sys.modules.pop("my_nets", None)
    elsewhere = nets_dir / "elsewhere"
    elsewhere.mkdir()
    (nets_dir / "my_nets.py").rename(elsewhere / "my_nets.py")   # the class is no longer importable
    code, out, err = run(capsys, "validate", str(nets_dir / "odd.graph.json"))
    assert code == 1 and "cannot import class my_nets:Sine" in err and "ok" not in out, err


def test_validate_says_how_large_a_billion_parameter_model_is(capsys, tmp_path):
    import json as _json

    data = _json.loads(MLP_TEXT)
    fc1 = next(n for n in data["nodes"] if n["id"] == "fc1")
    fc1["params"]["out_features"] = 2_015_625_000     # 129 billion weights into fc1 alone
    path = tmp_path / "huge.graph.json"
    path.write_text(_json.dumps(data))
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 0 and "billion parameters (fc2:" in out and "to train with AdamW" in out and out.endswith("ok\n")
