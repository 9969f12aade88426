"""A master of the Redis Cluster killed (SIGKILL) under appends, with the durability setting
on: its replica takes over, appends are answered again once the killed node is back (as
the new master's replica), and no append whose sender was answered is lost. (How long the
partitions stall: ``benchmarks/cluster_appends.py --failover``.)"""

from __future__ import annotations

from shared.bus import Keys

from ..cluster import LocalCluster, failover_drill, redis_server


async def test_no_acknowledged_append_is_lost_when_a_master_dies(keys: Keys) -> None:
    server = redis_server()
    assert server is not None, "no redis-server 7 to start a cluster from"
    cluster = LocalCluster(server).start()  # its own: this test kills one of its nodes
    try:
        drill = await failover_drill(cluster, keys)
        assert drill.failed_rounds > 0  # the kill did stall the dead master's partitions
        assert drill.acknowledged == keys.partitions
        assert drill.lost == {}
        cluster.wait_healthy()  # three masters again: the replica took over
    finally:
        cluster.stop()
