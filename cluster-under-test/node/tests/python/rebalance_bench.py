"""Time from a member's death to a stable group: classic vs KIP-848, through librdkafka.

Usage: rebalance_bench.py BOOTSTRAP TOPIC PARTITIONS MEMBERS PROTOCOL
       rebalance_bench.py member BOOTSTRAP TOPIC GROUP PROTOCOL NAME   (one member process)

MEMBERS confluent-kafka consumers (each its own process, group.protocol=PROTOCOL) join one
group on TOPIC; once every partition is owned by exactly one member, one member is killed
(SIGKILL: no leave, so the coordinator's session clock has to notice) and the time until the
survivors again own every partition exactly once (each survivor owning some) is measured; then
another member leaves cleanly (SIGTERM: it closes its consumer) and the time until the rest own
every partition again is measured the same way. Both protocols run with a 6 s
session timeout and a 500 ms heartbeat (classic: the client's settings; consumer: the node's
group.consumer.* settings). Prints one JSON line.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time


def member(bootstrap, topic, group, protocol, name):
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "enable.auto.commit": False, "client.id": name}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     "partition.assignment.strategy": "range"})
    owned = set()

    def report():
        print(json.dumps({"t": time.time(), "name": name, "owned": sorted(owned)}), flush=True)

    def on_assign(c, parts):
        if protocol == "classic":
            owned.clear()
        owned.update(p.partition for p in parts)
        report()

    def on_revoke(c, parts):
        owned.difference_update(p.partition for p in parts)
        report()

    c = Consumer(conf)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    while not stopping:
        c.poll(0.2)
    # A clean leave: close() sends LeaveGroup (classic) or a leaving heartbeat (consumer).
    c.close()


def main():
    if sys.argv[1] == "member":
        member(*sys.argv[2:7])
        return
    bootstrap, topic, partitions, members, protocol = sys.argv[1:6]
    partitions, members = int(partitions), int(members)
    group = f"{topic}-{protocol}-{members}"
    owned, lock = {}, threading.Lock()
    procs = {}

    def read(name, proc):
        for line in proc.stdout:
            try:
                seen = json.loads(line)
            except ValueError:
                continue
            with lock:
                owned[name] = set(seen["owned"])

    for i in range(members):
        name = f"m{i}"
        proc = subprocess.Popen([sys.executable, __file__, "member", bootstrap, topic, group,
                                 protocol, name], stdout=subprocess.PIPE, text=True)
        procs[name] = proc
        threading.Thread(target=read, args=(name, proc), daemon=True).start()

    def stable(alive):
        with lock:
            sets = [owned.get(n, set()) for n in alive]
        total = sum(len(s) for s in sets)
        union = set().union(*sets)
        # Every member owns something (PARTITIONS is at least MEMBERS), each partition once.
        return (total == partitions and union == set(range(partitions))
                and all(sets))

    def wait(alive, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if stable(alive):
                return True
            time.sleep(0.02)
        return False

    result = {"protocol": protocol, "members": members, "partitions": partitions}
    start = time.time()
    alive = list(procs)
    result["joined"] = wait(alive, 120)
    result["join_s"] = round(time.time() - start, 2)
    time.sleep(2)  # settled
    victim = alive.pop(0)
    t0 = time.time()
    os.kill(procs[victim].pid, signal.SIGKILL)
    procs[victim].wait()
    result["restabilised"] = wait(alive, 120)
    result["death_to_stable_s"] = round(time.time() - t0, 2)
    time.sleep(2)  # settled again
    leaver = alive.pop(0)
    t0 = time.time()
    os.kill(procs[leaver].pid, signal.SIGTERM)
    result["left_stable"] = wait(alive, 120)
    result["leave_to_stable_s"] = round(time.time() - t0, 2)
    procs[leaver].wait()
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(json.dumps(result))
    sys.exit(0 if result["joined"] and result["restabilised"] and result["left_stable"] else 1)


if __name__ == "__main__":
    main()
