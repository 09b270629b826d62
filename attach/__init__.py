"""Mirror a running Apache Pulsar cluster into the project's log (``lbctl attach``).

Pure translation (no I/O, no clock): ``attach.channel`` (the extensible load manager's
ownership channel), ``attach.loads`` (its load data and top bundles; the modular manager's load
reports), ``attach.members`` (brokers and the leader), ``attach.modular`` (the modular manager's
ownership, polled), ``attach.shadow`` (what the project's ownership fold holds, and the events
that take it to a given record). Shells: ``attach.source`` (Pulsar's client and REST),
``attach.mirror`` (the loop, the log's single writer) and ``actors.cluster.mirror_link`` (a read-only
``Link`` for the verbs on a mirrored state directory).

Deciding on what was mirrored: ``attach.advise`` (the leader's fold and shedding run on the
mirrored log), ``attach.proposals`` (a cycle's moves as a proposal record), ``attach.execute``
(the pure state machine of executions: caps, one per bundle, every ending); shells:
``attach.drive`` (the per-cycle hook of advise and drive modes), ``attach.pulsar_admin``
(Pulsar's settings, unloads and splits over REST) and ``attach.report`` (advise and drive reports).
"""
