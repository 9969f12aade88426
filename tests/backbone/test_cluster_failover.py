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


async def test_with_two_replicas_a_master_its_shard_takes_durable_writes_before_it_is_back(
    keys: Keys,
) -> None:
    """3+6 (``deploy/kubernetes/overlays/cluster-3x2``) with ``min-replicas-to-write 1``: the
    promoted replica keeps a replica (its sibling follows it), so the dead master's
    partitions take appends again, answered by a replica, before the killed node is
    restarted (the drill restarts it only then). With one replica a master the promoted one
    has none until the killed node is back and synced: these appends never succeed."""
    server = redis_server()
    assert server is not None, "no redis-server 7 to start a cluster from"
    durable = ("--min-replicas-to-write", "1")
    cluster = LocalCluster(server, replicas=2, options=durable).start()
    try:
        drill = await failover_drill(cluster, keys, timeout_s=30)
        assert drill.failed_rounds > 0  # the kill did stall the dead master's partitions
        assert drill.acknowledged == keys.partitions and drill.lost == {}
    finally:
        cluster.stop()
