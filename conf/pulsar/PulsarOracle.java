/*
 * The oracle of `make conformance` (docs/conformance.md): Apache Pulsar 4.0's own classes, no mocks.
 *
 * JSON lines in, JSON lines out: each request is {"command": "shed" | "accept" | "split" | "bundle" |
 * "place", "input": <what `lbctl decide <command>` reads>, "follow": [...] (place only)} and each answer
 * is the output `lbctl decide` prints for it (decisions as sets, see lbctl/conformance/compare.py), or
 * {"error": "..."} when Pulsar's code throws. One JVM answers thousands of cases.
 *
 * Two pieces of Pulsar need a running broker to be constructed: NamespaceBundleFactory (it registers on
 * the metadata store) and NamespaceService (it asks the broker for a bundle's topics). The factory is
 * allocated without its constructor and given its two fields (CRC-32 and the consistent-hashing
 * assigner, what its constructor sets); NamespaceService is subclassed to hand over the topic list of
 * the input. Every decision itself is Pulsar's code.
 *
 * Compile once: javac -cp '.cache/pulsar-libs/*' -d .cache/pulsar-oracle conf/pulsar/PulsarOracle.java
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.common.collect.Multimap;
import com.google.common.collect.Range;
import com.google.common.collect.BoundType;
import com.google.common.hash.Hashing;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import org.apache.pulsar.broker.ServiceConfiguration;
import org.apache.pulsar.broker.loadbalance.LoadData;
import org.apache.pulsar.broker.loadbalance.LoadSheddingStrategy;
import org.apache.pulsar.broker.loadbalance.extensions.BrokerRegistry;
import org.apache.pulsar.broker.loadbalance.extensions.LoadManagerContext;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLoadData;
import org.apache.pulsar.broker.loadbalance.extensions.data.BrokerLookupData;
import org.apache.pulsar.broker.loadbalance.extensions.store.LoadDataStore;
import org.apache.pulsar.broker.loadbalance.ModularLoadManagerStrategy;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitState;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateData;
import org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateDataConflictResolver;
import org.apache.pulsar.broker.loadbalance.impl.AvgShedder;
import org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate;
import org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight;
import org.apache.pulsar.broker.loadbalance.impl.OverloadShedder;
import org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder;
import org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder;
import org.apache.pulsar.broker.namespace.NamespaceService;
import org.apache.pulsar.common.configuration.PulsarConfigurationLoader;
import org.apache.pulsar.common.naming.BundleSplitOption;
import org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner;
import org.apache.pulsar.common.naming.FlowOrQpsEquallyDivideBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.FlowOrQpsEquallyDivideBundleSplitOption;
import org.apache.pulsar.common.naming.NamespaceBundle;
import org.apache.pulsar.common.naming.NamespaceBundleFactory;
import org.apache.pulsar.common.naming.NamespaceBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.NamespaceBundles;
import org.apache.pulsar.common.naming.NamespaceName;
import org.apache.pulsar.common.naming.RangeEquallyDivideBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.SpecifiedPositionsBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.TopicCountEquallyDivideBundleSplitAlgorithm;
import org.apache.pulsar.common.naming.TopicName;
import org.apache.pulsar.common.policies.data.BundlesData;
import org.apache.pulsar.common.policies.data.PoliciesUtil;
import org.apache.pulsar.common.policies.data.stats.TopicStatsImpl;
import org.apache.pulsar.policies.data.loadbalancer.BrokerData;
import org.apache.pulsar.policies.data.loadbalancer.BundleData;
import org.apache.pulsar.policies.data.loadbalancer.LocalBrokerData;
import org.apache.pulsar.policies.data.loadbalancer.NamespaceBundleStats;
import org.apache.pulsar.policies.data.loadbalancer.ResourceUsage;
import org.apache.pulsar.policies.data.loadbalancer.SystemResourceUsage;

public class PulsarOracle {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String[] RESOURCES = {"cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"};

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        System.setOut(System.err); // whatever Pulsar's classes print stays off the answers
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode answer;
            try {
                JsonNode request = JSON.readTree(line);
                answer = dispatch(request.path("command").asText(), request.path("input"), request.path("follow"));
            } catch (Throwable t) {
                Throwable cause = t.getCause() != null && t instanceof java.util.concurrent.CompletionException
                        ? t.getCause() : t;
                answer = JSON.createObjectNode().put("error", cause.getClass().getSimpleName() + ": "
                        + cause.getMessage());
            }
            out.println(JSON.writeValueAsString(answer));
            out.flush();
        }
    }

    static JsonNode dispatch(String command, JsonNode input, JsonNode follow) throws Exception {
        switch (command) {
            case "shed": return shed(input);
            case "accept": return accept(input);
            case "split": return split(input);
            case "bundle": return bundle(input);
            case "place": return place(input, follow);
            case "autosplit": return autosplit(input);
            default: throw new IllegalArgumentException("unknown command " + command);
        }
    }

    // -- configuration: Pulsar's own loader over the input's broker.conf keys --------------------------

    static ServiceConfiguration config(JsonNode raw) throws Exception {
        Properties props = new Properties();
        Iterator<Map.Entry<String, JsonNode>> fields = raw.fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> e = fields.next();
            JsonNode v = e.getValue();
            String text = v.isArray() ? joined(v) : v.isNull() ? "" : v.asText();
            props.setProperty(e.getKey(), text);
        }
        return PulsarConfigurationLoader.create(props, ServiceConfiguration.class);
    }

    static String joined(JsonNode array) {
        List<String> parts = new ArrayList<>();
        array.forEach(x -> parts.add(x.asText()));
        return String.join(",", parts);
    }

    // -- shed: the four modular strategies, one findBundlesForUnloading per cycle --------------------

    static LoadSheddingStrategy shedder(String name) {
        String simple = name.substring(name.lastIndexOf('.') + 1);
        switch (simple) {
            case "ThresholdShedder": return new ThresholdShedder();
            case "OverloadShedder": return new OverloadShedder();
            case "UniformLoadShedder": return new UniformLoadShedder();
            case "AvgShedder": return new AvgShedder();
            default: throw new IllegalArgumentException("no oracle for strategy " + name);
        }
    }

    static JsonNode shed(JsonNode input) throws Exception {
        ServiceConfiguration conf = config(input.path("config"));
        String name = input.path("strategy").asText(conf.getLoadBalancerLoadSheddingStrategy());
        if (name.endsWith("TransferShedder")) {
            return Transfer.shed(input, conf);
        }
        LoadSheddingStrategy strategy = shedder(name);
        LoadData loadData = new LoadData();
        ArrayNode cycles = JSON.createArrayNode();
        for (JsonNode cycle : input.path("cycles")) {
            cycles.add(shedCycle(cycle, conf, strategy, loadData));
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("cycles", cycles);
        return out;
    }

    static ObjectNode shedCycle(JsonNode cycle, ServiceConfiguration conf, LoadSheddingStrategy strategy,
                                LoadData loadData) {
        long now = cycle.path("now_ms").asLong();
        Map<String, Set<String>> owned = applyBundles(cycle.path("bundles"), loadData);
        Set<String> brokers = applyBrokers(cycle.path("brokers"), owned, loadData);
        strategy.onActiveBrokersChange(brokers);
        Map<String, Long> recent = loadData.getRecentlyUnloadedBundles();
        cycle.path("recentlyUnloaded").fields() // merged as `lbctl decide shed` does: the later time wins
                .forEachRemaining(e -> recent.merge(e.getKey(), e.getValue().asLong(), Math::max));
        long timeout = now - conf.getLoadBalancerSheddingGracePeriodMinutes() * 60_000L;
        recent.keySet().removeIf(b -> recent.get(b) < timeout);
        ArrayNode decisions = JSON.createArrayNode();
        if (brokers.size() > 1) { // ModularLoadManagerImpl.doLoadShedding: nothing with one broker
            Multimap<String, String> selected = strategy.findBundlesForUnloading(loadData, conf);
            for (Map.Entry<String, String> e : selected.entries()) {
                ObjectNode d = decisions.addObject().put("bundle", e.getValue()).put("source", e.getKey());
                if (strategy instanceof AvgShedder avg) {
                    BundleData data = loadData.getBundleData().get(e.getValue());
                    d.put("destination", avg.selectBroker(brokers, data, loadData, conf).orElse(null));
                } else {
                    d.putNull("destination");
                }
                recent.put(e.getValue(), now);
            }
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("decisions", decisions);
        return out;
    }

    /** One sample per bundle per cycle (BundleData.update); bundles nobody reports are forgotten. */
    static Map<String, Set<String>> applyBundles(JsonNode bundles, LoadData loadData) {
        Map<String, Set<String>> owned = new HashMap<>();
        Set<String> seen = new HashSet<>();
        bundles.fields().forEachRemaining(e -> {
            JsonNode b = e.getValue();
            BundleData data = loadData.getBundleData().computeIfAbsent(e.getKey(), k -> new BundleData(10, 1000));
            data.update(bundleStats(b));
            seen.add(e.getKey());
            if (b.hasNonNull("owner")) {
                owned.computeIfAbsent(b.get("owner").asText(), k -> new TreeSet<>()).add(e.getKey());
            }
        });
        loadData.getBundleData().keySet().retainAll(seen);
        return owned;
    }

    static NamespaceBundleStats bundleStats(JsonNode b) {
        NamespaceBundleStats stats = new NamespaceBundleStats();
        stats.msgRateIn = b.path("msgRateIn").asDouble();
        stats.msgRateOut = b.path("msgRateOut").asDouble();
        stats.msgThroughputIn = b.path("msgThroughputIn").asDouble();
        stats.msgThroughputOut = b.path("msgThroughputOut").asDouble();
        stats.topics = b.path("topics").asLong();
        stats.producerCount = b.path("producers").asInt();
        stats.consumerCount = b.path("consumers").asInt();
        stats.cacheSize = b.path("cacheSize").asLong();
        return stats;
    }

    static Set<String> applyBrokers(JsonNode brokers, Map<String, Set<String>> owned, LoadData loadData) {
        Set<String> ids = new TreeSet<>();
        brokers.fields().forEachRemaining(e -> {
            ids.add(e.getKey());
            loadData.getBrokerData().put(e.getKey(), new BrokerData(localData(e.getKey(), e.getValue(), owned)));
        });
        loadData.getBrokerData().keySet().retainAll(ids);
        return ids;
    }

    /** The broker's report; its bundle set is what it owns, padded to its reported bundle count. */
    static LocalBrokerData localData(String id, JsonNode r, Map<String, Set<String>> owned) {
        LocalBrokerData data = new LocalBrokerData();
        data.setCpu(usage(r.path("cpu")));
        data.setMemory(usage(r.path("memory")));
        data.setDirectMemory(usage(r.path("directMemory")));
        data.setBandwidthIn(usage(r.path("bandwidthIn")));
        data.setBandwidthOut(usage(r.path("bandwidthOut")));
        data.setMsgRateIn(r.path("msgRateIn").asDouble());
        data.setMsgRateOut(r.path("msgRateOut").asDouble());
        data.setMsgThroughputIn(r.path("msgThroughputIn").asDouble());
        data.setMsgThroughputOut(r.path("msgThroughputOut").asDouble());
        Set<String> bundles = new HashSet<>(owned.getOrDefault(id, Set.of()));
        for (int i = 0; bundles.size() < r.path("bundles").asInt(0); i++) {
            bundles.add(id + "/unreported/" + i);
        }
        data.setBundles(bundles);
        return data;
    }

    static ResourceUsage usage(JsonNode u) {
        return new ResourceUsage(u.path("usage").asDouble(), u.path("limit").asDouble());
    }

    // -- place: the modular strategies' best set, and whether our pick is in it -----------------------

    static JsonNode place(JsonNode input, JsonNode follow) throws Exception {
        ServiceConfiguration conf = config(input.path("config"));
        if (conf.getLoadManagerClassName().endsWith("ExtensibleLoadManagerImpl")) {
            return ExtensiblePlace.run(input, conf);
        }
        String name = input.path("strategy").asText(conf.getLoadBalancerLoadPlacementStrategy());
        String simple = name.substring(name.lastIndexOf('.') + 1);
        ModularLoadManagerStrategy strategy = simple.equals("LeastResourceUsageWithWeight")
                ? new LeastResourceUsageWithWeight() : new LeastLongTermMessageRate();
        LoadData loadData = new LoadData();
        Map<String, Set<String>> owned = applyBundles(input.path("bundles"), loadData);
        Set<String> brokers = applyBrokers(input.path("brokers"), owned, loadData);
        input.path("brokers").fields().forEachRemaining(e -> {
            var avg = loadData.getBrokerData().get(e.getKey()).getTimeAverageData();
            avg.setLongTermMsgRateIn(e.getValue().path("msgRateIn").asDouble());
            avg.setLongTermMsgRateOut(e.getValue().path("msgRateOut").asDouble());
        });
        ObjectNode assignments = JSON.createObjectNode();
        int i = 0;
        for (JsonNode bundle : input.path("assign")) {
            String id = bundle.asText();
            BundleData data = loadData.getBundleData().getOrDefault(id, defaultBundleData());
            Optional<String> pick = strategy.selectBroker(new TreeSet<>(brokers), data, loadData, conf);
            if (pick.isPresent() && overloaded(loadData.getBrokerData().get(pick.get()), conf)) {
                // ModularLoadManagerImpl.selectBroker: an overloaded pick selects again (same brokers here)
                Optional<String> again = strategy.selectBroker(new TreeSet<>(brokers), data, loadData, conf);
                pick = again.isPresent() ? again : pick;
            }
            ObjectNode a = assignments.putObject(id);
            a.put("broker", pick.orElse(null));
            ArrayNode best = a.putArray("best");
            new TreeSet<>(bestBrokers(strategy)).forEach(best::add);
            String placed = follow.has(i) ? follow.get(i).asText() : pick.orElse(null);
            if (placed != null && loadData.getBrokerData().containsKey(placed)) {
                loadData.getBrokerData().get(placed).getPreallocatedBundleData().put(id, data);
            }
            i++;
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("assignments", assignments);
        return out;
    }

    static boolean overloaded(BrokerData broker, ServiceConfiguration conf) {
        double usage = broker.getLocalData().getMaxResourceUsageWithWeight(conf.getLoadBalancerCPUResourceWeight(),
                conf.getLoadBalancerDirectMemoryResourceWeight(), conf.getLoadBalancerBandwidthInResourceWeight(),
                conf.getLoadBalancerBandwidthOutResourceWeight());
        return usage > conf.getLoadBalancerBrokerOverloadedThresholdPercentage() / 100.0;
    }

    static BundleData defaultBundleData() {
        NamespaceBundleStats stats = new NamespaceBundleStats();
        stats.msgRateIn = stats.msgRateOut = 50;
        stats.msgThroughputIn = stats.msgThroughputOut = 50000;
        return new BundleData(10, 1000, stats);
    }

    @SuppressWarnings("unchecked")
    static List<String> bestBrokers(ModularLoadManagerStrategy strategy) throws Exception {
        Field f = strategy.getClass().getDeclaredField("bestBrokers");
        f.setAccessible(true);
        return (List<String>) f.get(strategy);
    }

    // -- accept: ServiceUnitStateDataConflictResolver.shouldKeepLeft ---------------------------------

    static JsonNode accept(JsonNode input) {
        ArrayNode results = JSON.createArrayNode();
        for (JsonNode c : input.path("cases")) {
            ServiceUnitStateDataConflictResolver resolver = new ServiceUnitStateDataConflictResolver();
            resolver.setStorageType("strict".equals(c.path("mode").asText())
                    ? ServiceUnitState.StorageType.MetadataStore : ServiceUnitState.StorageType.SystemTopic);
            results.add(!resolver.shouldKeepLeft(record(c.path("current")), record(c.path("incoming"))));
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("results", results);
        return out;
    }

    static ServiceUnitStateData record(JsonNode r) {
        if (r.isMissingNode() || r.isNull()) {
            return null;
        }
        return new ServiceUnitStateData(ServiceUnitState.valueOf(r.path("state").asText()),
                text(r.path("dst")), text(r.path("src")), null, r.path("force").asBoolean(false), 0L,
                r.path("version").asLong());
    }

    static String text(JsonNode n) {
        return n.isMissingNode() || n.isNull() ? null : n.asText();
    }

    // -- bundle and split: NamespaceBundles, the consistent-hashing assigner, the four algorithms -----

    static NamespaceBundleFactory factory() throws Exception {
        NamespaceBundleFactory f = (NamespaceBundleFactory) unsafe().allocateInstance(NamespaceBundleFactory.class);
        set(f, "hashFunc", Hashing.crc32());
        set(f, "topicBundleAssignmentStrategy", new ConsistentHashingTopicBundleAssigner());
        return f;
    }

    static void set(Object target, String field, Object value) throws Exception {
        Field f = target.getClass().getDeclaredField(field);
        f.setAccessible(true);
        f.set(target, value);
    }

    static final NamespaceBundleFactory FACTORY;
    static {
        try {
            FACTORY = factory();
        } catch (Exception e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    static JsonNode bundle(JsonNode input) {
        NamespaceName ns = NamespaceName.get(input.path("namespace").asText());
        BundlesData layout;
        if (input.has("boundaries")) {
            List<String> boundaries = new ArrayList<>();
            input.get("boundaries").forEach(b -> boundaries.add(String.format("0x%08x", b.asLong())));
            layout = BundlesData.builder().boundaries(boundaries).numBundles(boundaries.size() - 1).build();
        } else {
            layout = PoliciesUtil.getBundles(input.path("bundles").asInt());
        }
        NamespaceBundles bundles = FACTORY.getBundles(ns, layout);
        ObjectNode topics = JSON.createObjectNode();
        for (JsonNode t : input.path("topics")) {
            TopicName topic = TopicName.get(t.asText());
            topics.putObject(t.asText()).put("hash", FACTORY.getLongHashCode(topic.toString()))
                    .put("bundle", bundles.findBundle(topic).getBundleRange());
        }
        ObjectNode out = JSON.createObjectNode();
        out.set("topics", topics);
        return out;
    }

    /** Hands over the input's topic list and bundle counts: what a broker's NamespaceService answers. */
    static class TopicList extends NamespaceService {
        List<String> topics;
        Map<String, Integer> bundleCounts = new HashMap<>();
        NamespaceBundleFactory factory;

        @Override
        public NamespaceBundleFactory getNamespaceBundleFactory() {
            return factory;
        }

        TopicList() {
            super(null);
        }

        @Override
        public CompletableFuture<List<String>> getOwnedTopicListForNamespaceBundle(NamespaceBundle bundle) {
            return CompletableFuture.completedFuture(topics);
        }

        @Override
        public int getBundleCount(NamespaceName namespace) {
            return bundleCounts.getOrDefault(namespace.toString(), 0);
        }
    }

    // -- autosplit: BundleSplitterTask.findBundlesToSplit (modular), one cycle --------------------------

    static JsonNode autosplit(JsonNode input) throws Exception {
        ServiceConfiguration conf = config(input.path("config"));
        if (conf.getLoadManagerClassName().endsWith("ExtensibleLoadManagerImpl")) {
            return ExtensibleSplit.run(input, conf);
        }
        TopicList service = (TopicList) unsafe().allocateInstance(TopicList.class);
        service.bundleCounts = new HashMap<>();
        input.path("bundleCounts").fields().forEachRemaining(e -> service.bundleCounts.put(e.getKey(),
                e.getValue().asInt()));
        org.apache.pulsar.broker.PulsarService pulsar = (org.apache.pulsar.broker.PulsarService)
                unsafe().allocateInstance(org.apache.pulsar.broker.PulsarService.class);
        setField(org.apache.pulsar.broker.PulsarService.class, pulsar, "config", conf);
        setField(org.apache.pulsar.broker.PulsarService.class, pulsar, "nsService", service);
        LoadData loadData = new LoadData();
        LocalBrokerData local = new LocalBrokerData();
        Map<String, NamespaceBundleStats> last = new HashMap<>();
        input.path("cycles").get(0).path("bundles").fields().forEachRemaining(e -> {
            JsonNode b = e.getValue();
            NamespaceBundleStats stats = new NamespaceBundleStats();
            stats.topics = b.path("topics").asLong();
            stats.producerCount = b.path("producers").asInt();
            stats.consumerCount = b.path("consumers").asInt();
            stats.msgRateIn = b.path("msgRate").asDouble();
            stats.msgThroughputIn = b.path("throughput").asDouble();
            last.put(e.getKey(), stats);
            BundleData data = new BundleData(10, 1000);
            data.update(stats);
            loadData.getBundleData().put(e.getKey(), data);
        });
        local.setLastStats(last);
        loadData.getBrokerData().put("broker", new BrokerData(local));
        Map<String, String> found = new org.apache.pulsar.broker.loadbalance.impl.BundleSplitterTask()
                .findBundlesToSplit(loadData, pulsar);
        ObjectNode out = JSON.createObjectNode();
        ArrayNode splits = out.putArray("cycles").addObject().putArray("splits");
        new TreeSet<>(found.keySet()).forEach(b -> splits.addObject().put("bundle", b));
        return out;
    }

    static void setField(Class<?> owner, Object target, String field, Object value) throws Exception {
        Field f = owner.getDeclaredField(field);
        f.setAccessible(true);
        f.set(target, value);
    }

    static JsonNode split(JsonNode input) throws Exception {
        ServiceConfiguration conf = config(input.path("config"));
        String id = input.path("bundle").asText();
        int cut = id.lastIndexOf('/');
        String[] range = id.substring(cut + 1).split("_");
        NamespaceBundle bundle = new NamespaceBundle(NamespaceName.get(id.substring(0, cut)),
                Range.range(Long.decode(range[0]), BoundType.CLOSED, Long.decode(range[1]),
                        Long.decode(range[1]) == 0xffffffffL ? BoundType.CLOSED : BoundType.OPEN), FACTORY);
        sun.misc.Unsafe unsafe = unsafe();
        TopicList service = (TopicList) unsafe.allocateInstance(TopicList.class);
        service.topics = new ArrayList<>();
        Map<String, TopicStatsImpl> stats = new HashMap<>();
        for (JsonNode t : input.path("topics")) {
            String name = t.path("name").asText();
            service.topics.add(name);
            TopicStatsImpl s = new TopicStatsImpl();
            s.msgRateIn = t.path("msgRate").asDouble();
            s.msgThroughputIn = t.path("throughput").asDouble();
            stats.put(name, s);
        }
        List<Long> positions = null;
        if (input.has("positions") && !input.get("positions").isNull()) {
            positions = new ArrayList<>();
            for (JsonNode p : input.get("positions")) {
                positions.add(p.asLong());
            }
        }
        String algorithm = input.path("algorithm").asText(conf.getDefaultNamespaceBundleSplitAlgorithm());
        BundleSplitOption option = algorithm.equals("flow_or_qps_equally_divide")
                ? new FlowOrQpsEquallyDivideBundleSplitOption(service, bundle, positions, stats,
                        conf.getLoadBalancerNamespaceBundleMaxMsgRate(),
                        conf.getLoadBalancerNamespaceBundleMaxBandwidthMbytes(),
                        conf.getFlowOrQpsDifferenceThresholdPercentage())
                : new BundleSplitOption(service, bundle, positions);
        List<Long> found = NamespaceBundleSplitAlgorithm.of(algorithm).getSplitBoundary(option).join();
        ObjectNode out = JSON.createObjectNode();
        ArrayNode boundaries = out.putArray("boundaries");
        if (found != null) {
            found.forEach(boundaries::add);
        }
        return out;
    }

    static sun.misc.Unsafe unsafe() throws Exception {
        Field unsafeField = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        unsafeField.setAccessible(true);
        return (sun.misc.Unsafe) unsafeField.get(null);
    }

    // -- shed with TransferShedder: the extensible manager's strategy on a LoadManagerContext of plain
    //    stores (as Pulsar's TransferShedderTest builds it); UnloadScheduler's bookkeeping around it ----

    /**
     * TransferShedder reads the real clock (TTL: {@code now - updatedAt}); the input's times are virtual
     * ({@code now_ms} per cycle). Each cycle maps virtual to real with {@code shift = currentTimeMillis() -
     * now_ms}: a report {@code reportAgeMs} old gets {@code updatedAt = now_ms - age + shift}, and the
     * recently-unloaded brokers and bundles (kept here in virtual time) are handed over shifted the same
     * way, so every difference Pulsar takes (TTL, cool-down, grace period) is the virtual one.
     */
    static class Transfer {
        static JsonNode shed(JsonNode input, ServiceConfiguration conf) throws Exception {
            var counter = new org.apache.pulsar.broker.loadbalance.extensions.models.UnloadCounter();
            var shedder = new org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder(counter);
            Map<String, BrokerLoadData> brokerStore = new HashMap<>();
            Map<String, org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData> topStore =
                    new HashMap<>();
            Map<String, BrokerLookupData> available = new HashMap<>();
            LoadManagerContext context = context(conf, brokerStore, topStore, available);
            // TopKBundles asks a broker for policies only when shedding bundles with policies is off; the
            // generated namespaces have none, so its PulsarService holds a configuration saying "on".
            ServiceConfiguration topConf = config(input.path("config"));
            topConf.setLoadBalancerSheddingBundlesWithPoliciesEnabled(true);
            org.apache.pulsar.broker.PulsarService pulsar = (org.apache.pulsar.broker.PulsarService)
                    unsafe().allocateInstance(org.apache.pulsar.broker.PulsarService.class);
            setField(org.apache.pulsar.broker.PulsarService.class, pulsar, "config", topConf);
            Map<String, Long> recentBundles = new HashMap<>(); // virtual ms
            Map<String, Long> recentBrokers = new HashMap<>(); // virtual ms
            ArrayNode cycles = JSON.createArrayNode();
            for (JsonNode cycle : input.path("cycles")) {
                long virtualNow = cycle.path("now_ms").asLong();
                long shift = System.currentTimeMillis() - virtualNow;
                Map<String, Map<String, NamespaceBundleStats>> reported = new HashMap<>();
                cycle.path("bundles").fields().forEachRemaining(e -> {
                    JsonNode b = e.getValue();
                    if (b.hasNonNull("owner")) {
                        reported.computeIfAbsent(b.get("owner").asText(), k -> new HashMap<>())
                                .put(e.getKey(), bundleStats(b));
                    }
                });
                Set<String> ids = new HashSet<>();
                cycle.path("brokers").fields().forEachRemaining(e -> ids.add(e.getKey()));
                brokerStore.keySet().retainAll(ids);
                topStore.clear();
                available.clear();
                for (String id : new TreeSet<>(ids)) {
                    JsonNode r = cycle.path("brokers").get(id);
                    BrokerLoadData data = brokerStore.computeIfAbsent(id, k -> new BrokerLoadData());
                    SystemResourceUsage usage = new SystemResourceUsage();
                    usage.setCpu(usage(r.path("cpu")));
                    usage.setMemory(usage(r.path("memory")));
                    usage.setDirectMemory(usage(r.path("directMemory")));
                    usage.setBandwidthIn(usage(r.path("bandwidthIn")));
                    usage.setBandwidthOut(usage(r.path("bandwidthOut")));
                    Map<String, NamespaceBundleStats> owned = reported.getOrDefault(id, Map.of());
                    data.update(usage, r.path("msgThroughputIn").asDouble(), r.path("msgThroughputOut").asDouble(),
                            r.path("msgRateIn").asDouble(), r.path("msgRateOut").asDouble(),
                            r.path("bundles").asLong(owned.size()), r.path("topics").asLong(), conf);
                    setField(BrokerLoadData.class, data, "updatedAt",
                            virtualNow - r.path("reportAgeMs").asLong(0) + shift);
                    var top = new org.apache.pulsar.broker.loadbalance.extensions.models.TopKBundles(pulsar);
                    top.update(owned, conf.getLoadBalancerMaxNumberOfBundlesInBundleLoadReport());
                    topStore.put(id, top.getLoadData());
                    available.put(id, null);
                }
                // UnloadScheduler.execute: the grace period, then the strategy, then the bookkeeping
                cycle.path("recentlyUnloaded").fields()
                        .forEachRemaining(e -> recentBundles.merge(e.getKey(), e.getValue().asLong(), Math::max));
                long timeout = virtualNow - conf.getLoadBalancerSheddingGracePeriodMinutes() * 60_000L;
                recentBundles.keySet().removeIf(b -> recentBundles.get(b) < timeout);
                Map<String, Long> bundlesReal = new HashMap<>();
                recentBundles.forEach((b, t) -> bundlesReal.put(b, t + shift));
                Map<String, Long> brokersReal = new HashMap<>();
                recentBrokers.forEach((b, t) -> brokersReal.put(b, t + shift));
                if (ids.size() <= 1) {
                    // UnloadScheduler.execute: "Only 1 broker available", the strategy is not called (its
                    // hit count stays); no counter reason either, `lbctl decide` reports NoBrokers
                    cycles.addObject().put("skip", "NoBrokers").putArray("decisions");
                    continue;
                }
                var before = skips(counter);
                var decisions = shedder.findBundlesForUnloading(context, bundlesReal, brokersReal);
                skips(counter).forEach((k, n) -> { // it catches every Throwable and counts Failure: make it loud
                    if (k.startsWith("Failure:") && n > before.getOrDefault(k, 0L)) {
                        throw new IllegalStateException("TransferShedder failed (" + k + ")");
                    }
                });
                recentBrokers.keySet().retainAll(brokersReal.keySet()); // the cool-downs it let go
                ArrayNode out = JSON.createArrayNode();
                for (var d : decisions) {
                    if (d.getLabel() != org.apache.pulsar.broker.loadbalance.extensions.models.UnloadDecision
                            .Label.Success) {
                        continue;
                    }
                    var unload = d.getUnload();
                    out.addObject().put("bundle", unload.serviceUnit()).put("source", unload.sourceBroker())
                            .put("destination", unload.destBroker().orElse(null))
                            .put("reason", d.getReason().name());
                    recentBundles.put(unload.serviceUnit(), virtualNow);
                    recentBrokers.put(unload.sourceBroker(), virtualNow);
                }
                ObjectNode c = cycles.addObject();
                c.set("decisions", out);
                String skip = newSkip(before, skips(counter));
                if (skip == null) {
                    c.putNull("skip");
                } else {
                    c.put("skip", skip);
                }
            }
            ObjectNode result = JSON.createObjectNode();
            result.set("cycles", cycles);
            return result;
        }

        static Map<String, Long> skips(org.apache.pulsar.broker.loadbalance.extensions.models.UnloadCounter c) {
            Map<String, Long> out = new HashMap<>();
            c.getBreakdownCounters().forEach((label, reasons) -> reasons.forEach((reason, n) ->
                    out.put(label.name() + ":" + reason.name(), n.get())));
            return out;
        }

        static String newSkip(Map<String, Long> before, Map<String, Long> after) {
            for (var e : after.entrySet()) {
                if (e.getKey().startsWith("Skip:") && e.getValue() > before.getOrDefault(e.getKey(), 0L)) {
                    return e.getKey().substring(5);
                }
            }
            return null;
        }

        @SuppressWarnings("unchecked")
        static <T> LoadDataStore<T> store(Map<String, T> map) {
            return (LoadDataStore<T>) java.lang.reflect.Proxy.newProxyInstance(
                    LoadDataStore.class.getClassLoader(), new Class<?>[] {LoadDataStore.class}, (p, m, a) -> {
                        switch (m.getName()) {
                            case "get": return Optional.ofNullable(map.get((String) a[0]));
                            case "entrySet": return map.entrySet();
                            case "size": return map.size();
                            case "forEach":
                                map.forEach((java.util.function.BiConsumer<String, T>) a[0]);
                                return null;
                            default: throw new UnsupportedOperationException(m.getName());
                        }
                    });
        }

        static LoadManagerContext context(ServiceConfiguration conf, Map<String, BrokerLoadData> brokers,
                Map<String, org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData> top,
                Map<String, BrokerLookupData> available) {
            LoadDataStore<BrokerLoadData> brokerStore = store(brokers);
            LoadDataStore<org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData> topStore =
                    store(top);
            BrokerRegistry registry = (BrokerRegistry) java.lang.reflect.Proxy.newProxyInstance(
                    BrokerRegistry.class.getClassLoader(), new Class<?>[] {BrokerRegistry.class}, (p, m, a) -> {
                        if (m.getName().equals("getAvailableBrokerLookupDataAsync")) {
                            return CompletableFuture.completedFuture(new HashMap<>(available));
                        }
                        throw new UnsupportedOperationException(m.getName());
                    });
            return new LoadManagerContext() {
                public ServiceConfiguration brokerConfiguration() {
                    return conf;
                }

                public LoadDataStore<BrokerLoadData> brokerLoadDataStore() {
                    return brokerStore;
                }

                public LoadDataStore<org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData>
                        topBundleLoadDataStore() {
                    return topStore;
                }

                public BrokerRegistry brokerRegistry() {
                    return registry;
                }
            };
        }
    }

    // -- autosplit (extensible): DefaultNamespaceBundleSplitStrategyImpl.findBundlesToSplit, cycle by cycle --

    /** Hands over the cycle's bundle stats: what a broker's BrokerService answers. */
    static class BundleStatsSource extends org.apache.pulsar.broker.service.BrokerService {
        Map<String, NamespaceBundleStats> stats = new HashMap<>();

        BundleStatsSource() throws Exception {
            super(null, null); // never run: allocated without its constructor
        }

        @Override
        public Map<String, NamespaceBundleStats> getBundleStats() {
            return stats;
        }
    }

    /**
     * The strategy asks a broker for: its bundle stats (BrokerService), the namespace's bundle count and
     * split boundary (NamespaceService, Pulsar's own getSplitBoundary over the input), the bundles in
     * Splitting state and ownership (the channel: every reported bundle is owned by this broker, the
     * input's {@code splitting} bundles are in Splitting state) and its broker id. The factory gets a
     * bundle cache only so that {@code invalidateBundleCache} has something to clear.
     */
    static class ExtensibleSplit {
        static JsonNode run(JsonNode input, ServiceConfiguration conf) throws Exception {
            sun.misc.Unsafe unsafe = unsafe();
            TopicList service = (TopicList) unsafe.allocateInstance(TopicList.class);
            service.topics = new ArrayList<>();
            setField(NamespaceService.class, service, "config", conf);
            NamespaceBundleFactory factory = factory();
            setField(NamespaceBundleFactory.class, factory, "bundlesCache",
                    com.github.benmanes.caffeine.cache.Caffeine.newBuilder().buildAsync(
                            (NamespaceName k) -> { throw new UnsupportedOperationException(); }));
            service.factory = factory;
            BundleStatsSource broker = (BundleStatsSource) unsafe.allocateInstance(BundleStatsSource.class);
            Map<String, ServiceUnitStateData> ownership = new HashMap<>();
            var channel = (org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateChannel)
                    java.lang.reflect.Proxy.newProxyInstance(PulsarOracle.class.getClassLoader(),
                            new Class<?>[] {org.apache.pulsar.broker.loadbalance.extensions.channel
                                    .ServiceUnitStateChannel.class}, (p, m, a) -> {
                                switch (m.getName()) {
                                    case "isOwner": return true;
                                    case "getOwnershipEntrySet": return ownership.entrySet();
                                    default: throw new UnsupportedOperationException(m.getName());
                                }
                            });
            var impl = (org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl)
                    unsafe.allocateInstance(org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl.class);
            setField(org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl.class, impl,
                    "serviceUnitStateChannel", channel);
            org.apache.pulsar.broker.PulsarService pulsar = (org.apache.pulsar.broker.PulsarService)
                    unsafe.allocateInstance(org.apache.pulsar.broker.PulsarService.class);
            Class<?> ps = org.apache.pulsar.broker.PulsarService.class;
            setField(ps, pulsar, "config", conf);
            setField(ps, pulsar, "nsService", service);
            setField(ps, pulsar, "brokerService", broker);
            setField(ps, pulsar, "loadManager", new java.util.concurrent.atomic.AtomicReference<>(
                    new org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerWrapper(impl)));
            BrokerRegistry registry = (BrokerRegistry) java.lang.reflect.Proxy.newProxyInstance(
                    BrokerRegistry.class.getClassLoader(), new Class<?>[] {BrokerRegistry.class}, (p, m, a) -> {
                        if (m.getName().equals("getBrokerId")) {
                            return "broker";
                        }
                        throw new UnsupportedOperationException(m.getName());
                    });
            LoadManagerContext context = Transfer.context(conf, new HashMap<>(), new HashMap<>(), new HashMap<>());
            LoadManagerContext withRegistry = new LoadManagerContext() {
                public ServiceConfiguration brokerConfiguration() {
                    return conf;
                }

                public LoadDataStore<BrokerLoadData> brokerLoadDataStore() {
                    return context.brokerLoadDataStore();
                }

                public LoadDataStore<org.apache.pulsar.broker.loadbalance.extensions.data.TopBundlesLoadData>
                        topBundleLoadDataStore() {
                    return context.topBundleLoadDataStore();
                }

                public BrokerRegistry brokerRegistry() {
                    return registry;
                }
            };
            var counter = new org.apache.pulsar.broker.loadbalance.extensions.models.SplitCounter();
            var strategy = new org.apache.pulsar.broker.loadbalance.extensions.strategy
                    .DefaultNamespaceBundleSplitStrategyImpl(counter);
            Map<String, Integer> given = new HashMap<>();
            input.path("bundleCounts").fields().forEachRemaining(e -> given.put(e.getKey(), e.getValue().asInt()));
            ArrayNode cycles = JSON.createArrayNode();
            for (JsonNode cycle : input.path("cycles")) {
                broker.stats = new HashMap<>();
                service.bundleCounts = new HashMap<>(given);
                cycle.path("bundles").fields().forEachRemaining(e -> {
                    JsonNode b = e.getValue();
                    NamespaceBundleStats stats = new NamespaceBundleStats();
                    stats.topics = b.path("topics").isArray() ? b.path("topics").size() : b.path("topics").asLong();
                    stats.producerCount = b.path("producers").asInt();
                    stats.consumerCount = b.path("consumers").asInt();
                    stats.msgRateIn = b.path("msgRate").asDouble();
                    stats.msgThroughputIn = b.path("throughput").asDouble();
                    broker.stats.put(e.getKey(), stats);
                    String ns = e.getKey().substring(0, e.getKey().lastIndexOf('/'));
                    if (!given.containsKey(ns)) { // as `lbctl decide autosplit`: the bundles listed
                        service.bundleCounts.merge(ns, 1, Integer::sum);
                    }
                });
                ownership.clear();
                for (JsonNode b : cycle.path("splitting")) {
                    ownership.put(b.asText(), new ServiceUnitStateData(ServiceUnitState.Splitting, "broker", 1L));
                }
                ArrayNode splits = JSON.createArrayNode();
                cycles.addObject().set("splits", splits);
                if (!conf.isLoadBalancerEnabled() || !conf.isLoadBalancerAutoBundleSplitEnabled()) {
                    continue; // SplitScheduler.execute: the strategy is not called
                }
                for (var d : strategy.findBundlesToSplit(withRegistry, pulsar)) {
                    var split = d.getSplit();
                    String bundle = split.serviceUnit();
                    long lower = Long.decode(bundle.substring(bundle.lastIndexOf('/') + 1).split("_")[0]);
                    ObjectNode o = splits.addObject().put("bundle", bundle).put("reason", d.getReason().name());
                    ArrayNode boundaries = o.putArray("boundaries");
                    split.splitServiceUnitToDestBroker().keySet().stream()
                            .map(r -> Long.decode(r.split("_")[0])).filter(x -> x != lower).forEach(boundaries::add);
                }
            }
            ObjectNode out = JSON.createObjectNode();
            out.set("cycles", cycles);
            return out;
        }
    }

    // -- place (extensible): ExtensibleLoadManagerImpl.selectAsync, its filters and strategy --------------

    /**
     * {@code selectAsync} of an ExtensibleLoadManagerImpl allocated without its constructor and given the
     * four things it reads: the broker registry (the input's brokers, their lookup data with the reported
     * version and load-manager class), the context (broker load data: one report each, topics summed over
     * the bundles each owns, as `lbctl decide place` counts them), the filter pipeline Pulsar builds
     * without namespace policies (LoadManagerClass, MaxTopicCount, Version) and the strategy
     * (LeastResourceUsageWithWeight, wrapped only to read its best brokers on the thread that chose).
     */
    static class ExtensiblePlace {
        static JsonNode run(JsonNode input, ServiceConfiguration conf) throws Exception {
            Map<String, Long> topics = new HashMap<>();
            Map<String, Long> bundleCounts = new HashMap<>();
            input.path("bundles").fields().forEachRemaining(e -> {
                JsonNode b = e.getValue();
                if (b.hasNonNull("owner")) {
                    topics.merge(b.get("owner").asText(), b.path("topics").asLong(), Long::sum);
                    bundleCounts.merge(b.get("owner").asText(), 1L, Long::sum);
                }
            });
            Map<String, BrokerLoadData> loads = new HashMap<>();
            Map<String, BrokerLookupData> lookup = new HashMap<>();
            for (var it = input.path("brokers").fields(); it.hasNext(); ) {
                var e = it.next();
                JsonNode r = e.getValue();
                SystemResourceUsage usage = new SystemResourceUsage();
                usage.setCpu(usage(r.path("cpu")));
                usage.setMemory(usage(r.path("memory")));
                usage.setDirectMemory(usage(r.path("directMemory")));
                usage.setBandwidthIn(usage(r.path("bandwidthIn")));
                usage.setBandwidthOut(usage(r.path("bandwidthOut")));
                BrokerLoadData data = new BrokerLoadData();
                data.update(usage, r.path("msgThroughputIn").asDouble(), r.path("msgThroughputOut").asDouble(),
                        r.path("msgRateIn").asDouble(), r.path("msgRateOut").asDouble(),
                        bundleCounts.getOrDefault(e.getKey(), 0L), topics.getOrDefault(e.getKey(), 0L), conf);
                loads.put(e.getKey(), data);
                String manager = r.hasNonNull("loadManagerClassName") ? r.get("loadManagerClassName").asText()
                        : conf.getLoadManagerClassName();
                lookup.put(e.getKey(), new BrokerLookupData("http://" + e.getKey() + ":8080", null,
                        "pulsar://" + e.getKey() + ":6650", null, Map.of(), Map.of(), true, true, manager, 0L,
                        text(r.path("version")), Map.of()));
            }
            LoadManagerContext context = Transfer.context(conf, loads, new HashMap<>(), lookup);
            var strategy = new org.apache.pulsar.broker.loadbalance.extensions.strategy.LeastResourceUsageWithWeight();
            List<String> best = new ArrayList<>();
            var reading = new org.apache.pulsar.broker.loadbalance.extensions.strategy.BrokerSelectionStrategy() {
                @Override
                public Optional<String> select(Set<String> brokers,
                        org.apache.pulsar.common.naming.ServiceUnitId bundle, LoadManagerContext ctx) {
                    Optional<String> pick = strategy.select(brokers, bundle, ctx);
                    try {
                        Field f = strategy.getClass().getDeclaredField("bestBrokers");
                        f.setAccessible(true);
                        best.clear();
                        best.addAll(((ThreadLocal<List<String>>) f.get(strategy)).get());
                    } catch (ReflectiveOperationException ex) {
                        throw new IllegalStateException(ex);
                    }
                    return pick;
                }
            };
            var impl = (org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl)
                    unsafe().allocateInstance(org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl.class);
            Class<?> c = org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl.class;
            setField(c, impl, "brokerRegistry", context.brokerRegistry());
            setField(c, impl, "context", context);
            setField(c, impl, "brokerSelectionStrategy", reading);
            setField(c, impl, "brokerFilterPipeline", List.of(
                    new org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerLoadManagerClassFilter(),
                    new org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerMaxTopicCountFilter(),
                    new org.apache.pulsar.broker.loadbalance.extensions.filter.BrokerVersionFilter()));
            ObjectNode assignments = JSON.createObjectNode();
            for (JsonNode b : input.path("assign")) {
                String id = b.asText();
                int cut = id.lastIndexOf('/');
                NamespaceBundle bundle = FACTORY.getBundle(id.substring(0, cut), id.substring(cut + 1));
                // the candidates: the same pipeline run here on a copy, as selectAsync runs it
                Map<String, BrokerLookupData> candidates = new java.util.concurrent.ConcurrentHashMap<>(lookup);
                for (var filter : impl.getBrokerFilterPipeline()) {
                    try {
                        filter.filterAsync(candidates, bundle, context).get();
                    } catch (Exception ignored) {
                        // selectAsync ignores a failing filter (exceptionally)
                    }
                }
                best.clear();
                Optional<String> pick = impl.selectAsync(bundle, Set.of(),
                        org.apache.pulsar.broker.namespace.LookupOptions.builder().build()).get();
                ObjectNode a = assignments.putObject(id);
                a.put("broker", pick.orElse(null));
                ArrayNode cand = a.putArray("candidates");
                new TreeSet<>(candidates.keySet()).forEach(cand::add);
                ArrayNode bestOut = a.putArray("best");
                new TreeSet<>(best).forEach(bestOut::add);
            }
            ObjectNode out = JSON.createObjectNode();
            out.set("assignments", assignments);
            return out;
        }
    }
}
