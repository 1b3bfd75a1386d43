"""The SGLang flags of the shipped recipe and of the walkthrough, parsed by Infera's own
wrapper code (infera.engine.sglang.args.parse_sglang_args) over the simulator's
ServerArgs, and re-parsed by the engine from what the wrapper forwards."""

import argparse

import pytest

from sim_harness import recipe_argvs, substitute, walkthrough_worker_commands

MODEL = "/models/DeepSeek-V4-Pro"
HOST = "127.0.0.1"
ETCD = "127.0.0.1:9"  # parsed only, never contacted
SITE = {"sglang_worker_model_path": MODEL, "sglang_worker_tp_size": 8,
        "sglang_worker_host": HOST, "sglang_worker_port": 30000,
        "sglang_worker_advertise_host": HOST, "sglang_worker_etcd_endpoint": ETCD}
COMMON = {"model_path": MODEL, "tp_size": 8, "trust_remote_code": True,
          "attention_backend": "dsv4", "disable_radix_cache": True, "page_size": 256,
          "cuda_graph_max_bs_decode": 128, "swa_full_tokens_ratio": 0.15,
          "disable_shared_experts_fusion": True, "mem_fraction_static": 0.90,
          "disaggregation_mode": "null", "served_model_name": MODEL}
VARIANTS = {
    "nodp": {"dp_size": 1, "enable_dp_attention": False, "ep_size": 1,
             "chunked_prefill_size": 8192, "max_running_requests": None},
    "dp": {"dp_size": 8, "enable_dp_attention": True, "ep_size": 8,
           "enable_prefill_delayer": True, "prefill_delayer_max_delay_ms": 5000,
           "chunked_prefill_size": 65536, "max_running_requests": 256},
}


def parse_like_the_wrapper(argv):
    from infera.engine.sglang.args import parse_sglang_args

    return parse_sglang_args(argv)


def walkthrough_argvs():
    values = {"MODEL": MODEL, "HOST": HOST, "ETCD": ETCD}
    return {variant: substitute(argv, values)
            for variant, (_env, argv) in walkthrough_worker_commands().items()}


def assert_recipe_parsed(parsed, variant):
    server_args = parsed.server_args
    for field, value in {**COMMON, **VARIANTS[variant]}.items():
        assert getattr(server_args, field) == value, field
    # Infera's product default, set on the parsed namespace (the user does not pass it).
    assert server_args.kv_cache_dtype == "fp8_e4m3"
    assert (parsed.discovery_backend, parsed.request_transport,
            parsed.kv_event_transport) == ("etcd", "http", "zmq")


def assert_engine_reparses(parsed):
    """The engine gets the forwarded argv, and reads the same arguments from it."""
    from sglang.srt.server_args import prepare_server_args

    reparsed = prepare_server_args(parsed.sglang_argv)
    for field in (*COMMON, *VARIANTS["dp"]):
        assert getattr(reparsed, field) == getattr(parsed.server_args, field), field
    # The wrapper sets its fp8 default on its own parse only; the engine resolves "auto"
    # itself (SGLang's DeepSeek-V4 hook picks fp8_e4m3 too).
    assert reparsed.kv_cache_dtype == "auto"


@pytest.mark.parametrize("variant", ["nodp", "dp"])
def test_shipped_recipe_parses_through_infera(variant):
    parsed = parse_like_the_wrapper(recipe_argvs(SITE)[variant])
    assert_recipe_parsed(parsed, variant)
    assert_engine_reparses(parsed)


@pytest.mark.parametrize("variant", ["nodp", "dp"])
def test_walkthrough_commands_parse_through_infera(variant):
    parsed = parse_like_the_wrapper(walkthrough_argvs()[variant])
    assert_recipe_parsed(parsed, variant)
    assert_engine_reparses(parsed)


def test_dp_flag_is_an_abbreviation_of_dp_size():
    """SGLang has no --dp alias: `--dp 8` works by argparse's prefix matching, which
    only stays unambiguous while --dp-size is the one flag starting with --dp."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    options = parser._option_string_actions
    assert "--dp" not in options
    assert [name for name in options if name.startswith("--dp")] == ["--dp-size"]
    assert [name for name in options if name.startswith("--tp")] == ["--tp-size"]
    assert parser.parse_args(["--model-path", MODEL, "--dp", "8", "--tp", "8"]).dp_size == 8


def test_real_aliases_are_accepted():
    argv = ["--model", MODEL, "--tensor-parallel-size", "8", "--data-parallel-size", "8",
            "--expert-parallel-size", "4", "--cuda-graph-bs", "1", "2", "4"]
    server_args = parse_like_the_wrapper(argv).server_args
    assert (server_args.tp_size, server_args.dp_size, server_args.ep_size) == (8, 8, 4)
    assert server_args.cuda_graph_bs_decode == [1, 2, 4]
    assert parse_like_the_wrapper(["--model-path", MODEL, "--ep", "2"]).server_args.ep_size == 2


@pytest.mark.parametrize("extra, rejected", [
    (["--bogus-flag", "1"], "--bogus-flag 1"),
    (["--mem-fraction-statc", "0.8"], "--mem-fraction-statc 0.8"),
    (["--attention-backend", "dsv5"], "invalid choice: 'dsv5'"),
])
def test_unknown_and_misspelled_flags_are_rejected(capsys, extra, rejected):
    with pytest.raises(SystemExit) as exit_info:
        parse_like_the_wrapper(walkthrough_argvs()["nodp"] + extra)
    assert exit_info.value.code == 2
    assert rejected in capsys.readouterr().err


def test_engine_rejects_unknown_flag_like_sglang(launch, sim_env):
    engine = launch("sglang.launch_server", ["--model-path", MODEL, "--bogus-flag"], sim_env)
    assert engine.wait_exit() == 2
    assert "sglang serve: error: unrecognized arguments: --bogus-flag" in engine.stderr


def test_wrapper_rejects_unknown_flag(launch, sim_env):
    wrapper = launch("infera.engine.sglang", walkthrough_argvs()["nodp"] + ["--bogus-flag"],
                     sim_env)
    assert wrapper.wait_exit() == 2
    assert "error: unrecognized arguments: --bogus-flag" in wrapper.stderr
