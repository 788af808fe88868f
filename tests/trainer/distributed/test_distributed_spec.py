"""The run spec's ``distributed`` section: defaults, round trip, every bad value named by its field."""

from __future__ import annotations

import json

import pytest

from trainer.spec import SpecError, spec_from_dict


def problems_of(data: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        spec_from_dict(data)
    return info.value.problems


def test_defaults_are_one_process_and_round_trip():
    spec = spec_from_dict({})
    d = spec.distributed
    assert (d.strategy, d.nproc_per_node, d.nnodes, d.node_rank) == ("none", 1, 1, 0)
    assert (d.rdzv_endpoint, d.backend, d.fsdp_units, d.reshard_after_forward) == (
        "localhost:29500", "auto", [], True)
    assert spec.to_dict()["distributed"]["strategy"] == "none"
    again = spec_from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again.to_dict() == spec.to_dict()


def test_a_full_section_is_kept():
    section = {"strategy": "fsdp2", "nproc_per_node": 4, "nnodes": 2, "node_rank": 1,
               "rdzv_endpoint": "node0.cluster:29400", "rdzv_id": "job-17", "backend": "nccl",
               "fsdp_units": ["layer1", "layer2"], "reshard_after_forward": False}
    spec = spec_from_dict({"distributed": section, "train": {"batch_size": 64}})
    assert spec.to_dict()["distributed"] == section


def test_bad_choices_name_the_field_and_the_choices():
    assert problems_of({"distributed": {"strategy": "horovod", "backend": "mpi"}}) == [
        "distributed.strategy: unknown strategy 'horovod' (choose none, ddp, fsdp2)",
        "distributed.backend: unknown backend 'mpi' (choose auto, gloo, nccl)"]


def test_counts_and_ranks():
    found = problems_of({"distributed": {"nproc_per_node": 0, "nnodes": 2, "node_rank": 2}})
    assert found == ["distributed.nproc_per_node: must be at least 1, got 0",
                     "distributed.node_rank: must be 0..1 (distributed.nnodes is 2), got 2"]
    assert problems_of({"distributed": {"node_rank": -1}})[0].startswith("distributed.node_rank: must be 0..0")
    assert problems_of({"distributed": {"nproc_per_node": 5000}}) == [
        "distributed.nproc_per_node: at most 1024 processes a machine, got 5000"]


def test_wrong_types_are_named():
    found = problems_of({"distributed": {"nproc_per_node": "2", "fsdp_units": [1, 2],
                                         "reshard_after_forward": "yes", "gpus": 2}})
    assert any(p.startswith("distributed.gpus: unknown field") for p in found)
    assert 'distributed.nproc_per_node: expected an integer, got "2"' in found
    assert "distributed.fsdp_units: expected a list of graph node or group ids, got [1, 2]" in found
    assert 'distributed.reshard_after_forward: expected true or false, got "yes"' in found


@pytest.mark.parametrize("endpoint", ["localhost", "host:0", "host:70000", "a b:1", ":29500", ""])
def test_bad_endpoints(endpoint):
    found = problems_of({"distributed": {"rdzv_endpoint": endpoint}})
    assert len(found) == 1 and found[0].startswith("distributed.rdzv_endpoint: must be host:port")


@pytest.mark.parametrize("endpoint", ["10.0.0.1:29500", "[fe80::1]:1234", "node-3.example.org:80"])
def test_good_endpoints(endpoint):
    assert spec_from_dict({"distributed": {"rdzv_endpoint": endpoint}}).distributed.rdzv_endpoint == endpoint


def test_rdzv_id_and_empty_unit():
    found = problems_of({"distributed": {"rdzv_id": "my job", "strategy": "fsdp2", "fsdp_units": ["a", " "]}})
    assert found[0].startswith("distributed.rdzv_id: must be 1 to 128 letters")
    assert found[1] == "distributed.fsdp_units: holds an empty id"


def test_global_batch_must_split_among_the_processes():
    assert problems_of({"distributed": {"strategy": "ddp", "nproc_per_node": 3}, "train": {"batch_size": 64}}) == [
        "train.batch_size: the global batch 64 must divide evenly among 3 processes "
        "(distributed.nproc_per_node x distributed.nnodes)"]
    spec_from_dict({"distributed": {"strategy": "ddp", "nproc_per_node": 2, "nnodes": 2},
                    "train": {"batch_size": 64}})
    spec_from_dict({"distributed": {"nproc_per_node": 3}, "train": {"batch_size": 64}})  # strategy none: unused


def test_nccl_on_the_cpu_is_refused():
    assert problems_of({"device": "cpu", "distributed": {"backend": "nccl"}}) == [
        "distributed.backend: nccl needs CUDA devices, but device is 'cpu' (use gloo or auto)"]
