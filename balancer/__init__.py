"""The pure balancing domain: bundles, load, splitting, shedding, placement, ownership rules.

Invariant: nothing here imports Ray, Kafka, Spark, asyncio or reads a clock or a global RNG.
Time comes in as integers (epoch milliseconds); randomness as a seeded random.Random argument.
"""
