"""Discovery through etcd and the OpenAI proxy, as the walkthrough's verify step uses them."""

import json
import time

from sim_harness import (READY_LINE, free_port, http_json, router_args, sse_events,
                         wait_until)


def test_no_workers_gives_503_json_while_router_is_healthy(router):
    assert router.get("/health") == (200, {"status": "healthy", "workers": 0,
                                           "simulated": True})
    status, body = router.post("/v1/chat/completions", {
        "model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 503
    assert body == {"error": {"message": "no workers available",
                              "type": "service_unavailable"}}


def test_router_degraded_while_etcd_unreachable(launch, sim_env, model_dir):
    port = free_port()
    process = launch("infera.server",
                     router_args(f"http://127.0.0.1:{free_port()}", port, model_dir), sim_env)
    process.wait_for("listening on")
    url = f"http://127.0.0.1:{port}/health"
    wait_until(lambda: http_json("GET", url)[1]["status"] == "degraded", 5,
               "router never reported etcd as unreachable")
    assert "unreachable" in http_json("GET", url)[1]["reason"]


def test_worker_registers_and_serves_through_router(router, start_worker, etcd, model_dir):
    worker, worker_url = start_worker()
    worker.wait_for(READY_LINE)
    port = int(worker_url.rsplit(":", 1)[1])

    registrations = etcd.workers()
    key = f"infera/workers/{str(model_dir).strip('/').replace('/', '_')}/127.0.0.1:{port}"
    assert list(registrations) == [key]
    value = registrations[key]
    assert value["host"] == "127.0.0.1" and value["port"] == port
    assert value["model"] == value["served_model_name"] == str(model_dir)
    assert (value["variant"], value["tp"], value["dp"], value["ep"]) == ("nodp", 8, 1, 1)
    assert (value["request_transport"], value["kv_event_transport"]) == ("http", "zmq")
    assert value["simulated"] is True and value["pid"] == worker.process.pid

    router.wait_for_workers(1)
    workers = router.get("/v1/workers")[1]
    assert workers["workers"][0]["url"] == worker_url
    assert workers["workers"][0]["model"] == str(model_dir)
    assert router.get("/v1/models")[1]["data"][0]["id"] == str(model_dir)
    assert router.get("/health")[1] == {"status": "healthy", "workers": 1, "simulated": True}

    # The walkthrough's verify request.
    status, chat = router.post("/v1/chat/completions", {
        "model": str(model_dir), "messages": [{"role": "user", "content": "1+1=?"}],
        "max_tokens": 32, "temperature": 0})
    assert status == 200
    assert "2" in chat["choices"][0]["message"]["content"]
    assert chat["usage"]["completion_tokens"] > 0

    # What sglang.bench_serving --backend sglang-oai sends.
    content_type, events, _arrivals = sse_events(router.url + "/v1/completions", {
        "model": str(model_dir), "prompt": "word " * 400, "temperature": 0.0, "best_of": 1,
        "max_tokens": 40, "stream": True, "ignore_eos": True})
    assert content_type.startswith("text/event-stream")
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all("text" in chunk["choices"][0] for chunk in chunks)
    text = "".join(chunk["choices"][0]["text"] for chunk in chunks)
    assert text.startswith(" This is a simulated answer") and text.endswith(" simulated")
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"] == {"prompt_tokens": 400, "completion_tokens": 40,
                                   "total_tokens": 440}

    _content_type, chat_events, _arrivals = sse_events(router.url + "/v1/chat/completions", {
        "model": str(model_dir), "messages": [{"role": "user", "content": "1+1=?"}],
        "stream": True})
    text = "".join(event["choices"][0]["delta"].get("content", "")
                   for event in chat_events[:-1])
    assert "2" in text

    status, body = router.post("/v1/completions", {"model": "other", "prompt": "x"})
    assert status == 404 and "other" in body["error"]["message"]
    # bench_serving asks the base URL for this; the router has no such route.
    assert router.get("/get_server_info")[0] == 404
    assert http_json("GET", worker_url + "/get_server_info")[1]["simulated"] is True


def test_sigterm_deregisters(router, start_worker, etcd):
    worker, _url = start_worker()
    worker.wait_for(READY_LINE)
    router.wait_for_workers(1)
    assert worker.terminate() == 0
    assert "Deregistered from etcd" in worker.stdout
    assert etcd.workers() == {}
    router.wait_for_workers(0, timeout=3)
    assert "worker removed" in router.process.stdout


def test_lease_lapse_after_crash_drops_worker(router, start_worker, etcd):
    worker, _url = start_worker(env={"INFERA_SIM_FAULT": "exit_after_ready",
                                     "INFERA_SIM_FAULT_AFTER": "0.5",
                                     "INFERA_SIM_LEASE_TTL": "2"})
    worker.wait_for(READY_LINE)
    router.wait_for_workers(1)
    assert worker.wait_exit(5) == 1
    assert ("Received sigquit from a child process. It usually means the child failed."
            in worker.stdout)
    exited_at = time.monotonic()
    # Not revoked: the registration outlives the process until the lease lapses.
    assert len(etcd.workers()) == 1
    router.wait_for_workers(0, timeout=5)
    assert time.monotonic() - exited_at > 0.5


def test_transport_mismatch_is_not_routable(router, etcd):
    etcd.put("infera/workers/m/10.0.0.9:30000", json.dumps({
        "host": "10.0.0.9", "port": 30000, "model": "m", "served_model_name": "m",
        "variant": "nodp", "request_transport": "nats", "kv_event_transport": "zmq"}))
    router.process.wait_for("transport mismatch: request_transport=nats (router: http)")
    assert router.worker_count() == 0
