def test_enqueue_and_status(run_cli):
    r = run_cli("enqueue", '{"id":"a","command":"true"}')
    assert r.exit_code == 0 and r.stdout.strip() == "a"
    assert run_cli.json("status")["jobs"]["pending"] == 1
