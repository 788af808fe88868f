"""Launch lines for distributed runs: torchrun's own parser reads each node's line, bash reads the
Slurm script and, run with stand-ins for the Slurm commands, it hands torchrun the right arguments."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch.distributed.run import get_args_parser

from studio.cli import main as cli_main
from trainer.distributed.scripts import (
    Launch,
    commands_text,
    notes,
    sbatch_script,
    torchrun_argv,
    torchrun_line,
)
from trainer.spec import SpecError

BASH = shutil.which("bash")


def torchrun_args(line: str):
    argv = shlex.split(line)
    assert argv[0] == "torchrun"
    return get_args_parser().parse_args(argv[1:])


def test_each_nodes_torchrun_line_parses_with_torchruns_own_parser():
    launch = Launch("/shared/runs/my spec's.json", 4, nnodes=3, rdzv_endpoint="node01:29400", rdzv_id="exp-7",
                    db="postgresql://team@db.lab/runs", run_dir="/shared/ckpt")
    for rank in range(3):
        a = torchrun_args(torchrun_line(launch, rank))
        assert (a.nnodes, a.nproc_per_node, a.node_rank) == ("3", "4", rank)
        assert (a.rdzv_backend, a.rdzv_endpoint, a.rdzv_id) == ("c10d", "node01:29400", "exp-7")
        assert a.module and a.training_script == "trainer"
        assert a.training_script_args == ["run", "/shared/runs/my spec's.json", "--db", "postgresql://team@db.lab/runs",
                                          "--run-dir", "/shared/ckpt"]
    with pytest.raises(ValueError, match="node_rank: must be 0 to 2, got 3"):
        torchrun_argv(launch, 3)


def test_the_text_names_every_node_and_warns_about_what_breaks_on_several_machines():
    one = Launch("/x/spec.json", 2)
    assert notes(one) == []
    assert commands_text(one).count("torchrun ") == 1
    several = Launch("/x/spec.json", 8, nnodes=2, db="sqlite:////home/me/runs.sqlite")
    text = commands_text(several)
    assert "ddp over 16 processes (2 node(s) x 8)" in text
    assert "# node 0 (the rendezvous host):" in text and "# node 1:" in text
    said = "\n".join(notes(several))
    assert "only this machine reaches it" in said and "postgresql://" in said and "shared folder" in said
    shared = Launch("/x/spec.json", 8, nnodes=2, rdzv_endpoint="10.0.0.5:29500", db="postgresql://db/runs")
    assert not any("reaches" in n or "postgresql" in n for n in notes(shared))


def test_bad_values_are_named_by_field():
    with pytest.raises(SpecError) as err:
        Launch("/x/spec.json", 0, nnodes=0, strategy="none", rdzv_endpoint="node01", rdzv_id="a b")
    problems = "\n".join(err.value.problems)
    for field in ("nproc_per_node", "nnodes", "strategy", "rdzv_endpoint", "rdzv_id"):
        assert f"distributed.{field}:" in problems
    with pytest.raises(ValueError, match="Slurm time limit"):
        sbatch_script(Launch("/x/s.json", 2), time_limit="1:00\n#SBATCH --nodes=99")


@pytest.mark.process
@pytest.mark.skipif(BASH is None, reason="no bash")
def test_the_sbatch_script_is_valid_bash_and_asks_slurm_for_the_right_allocation(tmp_path):
    gpu = sbatch_script(Launch("/x/spec.json", 4, nnodes=2, name="resnet 18 / cifar"), time_limit="02:00:00",
                        partition="gpu")
    cpu = sbatch_script(Launch("/x/spec.json", 2, nnodes=3, gpus=False))
    for text in (gpu, cpu):
        path = tmp_path / "job.sbatch"
        path.write_text(text)
        done = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert text.startswith("#!/bin/bash\n")
    directives = [line for line in gpu.splitlines() if line.startswith("#SBATCH")]
    assert directives == ["#SBATCH --job-name=resnet-18-cifar", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                          "#SBATCH --gpus-per-node=4", "#SBATCH --time=02:00:00", "#SBATCH --partition=gpu",
                          "#SBATCH --output=resnet-18-cifar-%j.out"]
    assert "--gpus-per-node" not in cpu and "#SBATCH --nodes=3" in cpu


@pytest.mark.process
@pytest.mark.skipif(BASH is None, reason="no bash")
def test_the_sbatch_script_run_under_stand_in_slurm_commands_starts_torchrun_right(tmp_path):
    """Slurm cannot run here: scontrol, srun and torchrun are stand-ins that print what they were given."""
    bin_dir, log = tmp_path / "bin", tmp_path / "argv.json"
    bin_dir.mkdir()
    stand_ins = {
        # a long node list: a reader that stops at the first name would end the pipe while scontrol
        # still writes, and under pipefail its SIGPIPE (exit 141) would end the job
        "scontrol": 'test "$1 $2 $3" = "show hostnames gpu[07-08]" && printf "gpu07\\ngpu08\\n" && seq 100000',
        "srun": 'while [ "${1#--}" != "$1" ]; do shift; done; exec "$@"',
        "torchrun": f'exec {shlex.quote(sys.executable)} -c "import json, sys; '
                    f"json.dump(sys.argv[1:], open({str(log)!r}, 'w'))\" \"$@\"",
    }
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    spec = tmp_path / "my runs" / "spec $HOME.json"
    script = tmp_path / "job.sbatch"
    script.write_text(sbatch_script(Launch(str(spec), 4, nnodes=2, rdzv_endpoint="node01:29411", rdzv_id="exp",
                                           db="postgresql://team@db/runs")))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu[07-08]",
           "SLURM_NNODES": "2", "SLURM_JOB_ID": "4242"}
    done = subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    a = get_args_parser().parse_args(json.loads(log.read_text()))
    assert (a.nnodes, a.nproc_per_node, a.rdzv_backend) == ("2", "4", "c10d")
    assert (a.rdzv_endpoint, a.rdzv_id) == ("gpu07:29411", "exp-4242")    # the allocation's first node
    assert a.module and a.training_script == "trainer"
    assert a.training_script_args == ["run", str(spec), "--db", "postgresql://team@db/runs"]


def write_spec(folder: Path, **distributed) -> Path:
    path = folder / "spec.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "wide", "train": {"batch_size": 64},
                                "device": "cuda", "distributed": distributed}))
    return path


def test_the_launch_command_prints_lines_or_a_script_from_a_spec_file(tmp_path, capsys):
    spec = write_spec(tmp_path, strategy="fsdp2", nproc_per_node=8, nnodes=2, rdzv_endpoint="head:29500",
                      rdzv_id="wide-1")
    assert cli_main(["launch", str(spec), "--db", "postgresql://db/runs"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("torchrun ")]
    assert len(lines) == 2 and "fsdp2 over 16 processes" in out
    assert [torchrun_args(line).node_rank for line in lines] == [0, 1]
    assert torchrun_args(lines[1]).training_script_args == ["run", str(spec.resolve()), "--db", "postgresql://db/runs"]

    assert cli_main(["launch", str(spec), "--slurm", "--time", "04:00:00"]) == 0
    script = capsys.readouterr().out
    assert "#SBATCH --gpus-per-node=8" in script and "#SBATCH --time=04:00:00" in script


def test_the_launch_command_refuses_a_spec_without_a_strategy(tmp_path, capsys):
    assert cli_main(["launch", str(write_spec(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert "distributed.strategy: 'none' runs in one process" in err and "Traceback" not in err
    bad = write_spec(tmp_path, strategy="ddp", nproc_per_node=3)    # 64 does not divide among 3
    assert cli_main(["launch", str(bad)]) == 2
    assert "train.batch_size: the global batch 64 must divide evenly among 3 processes" in capsys.readouterr().err


def test_a_store_password_is_never_printed_and_the_lines_say_how_to_pass_it(tmp_path, capsys):
    """issue 22: `launch --db postgresql://user:secret@...` printed the password in every node's line."""
    spec = write_spec(tmp_path, strategy="ddp", nproc_per_node=2, nnodes=2, rdzv_endpoint="head:29500")
    url = "postgresql+psycopg://team:s3cr%40t@db.lab:5432/runs"
    for extra in ([], ["--slurm"]):
        assert cli_main(["launch", str(spec), "--db", url, *extra]) == 0
        out = capsys.readouterr().out
        assert "s3cr" not in out
        assert not [x for x in out.splitlines() if "--db" in x and not x.startswith("# ")]
        assert "export TORCH_STUDIO_DB set to that URL" in out
    line = next(x for x in commands_text(Launch(str(spec), 2, db=url)).splitlines() if x.startswith("torchrun"))
    assert torchrun_args(line).training_script_args == ["run", str(spec)]
    assert "--db" in torchrun_line(Launch(str(spec), 2, db="postgresql://team@db.lab/runs"), 0)   # no password


def test_the_launch_command_refuses_a_node_count_beyond_the_cap(tmp_path, capsys):
    """issue 22: nnodes had no cap (`launch` printed 200 MB of lines)."""
    assert cli_main(["launch", str(write_spec(tmp_path, strategy="ddp", nnodes=10**6,
                                              rdzv_endpoint="head:29500"))]) == 2
    out, err = capsys.readouterr()
    assert not out and "distributed.nnodes: at most 4096 machines, got 1000000" in err and len(err.splitlines()) <= 3
