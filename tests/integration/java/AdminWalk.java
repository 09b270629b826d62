/*
 * Apache Pulsar's own admin client (PulsarAdmin 4.0) against bundle-balancer's web service.
 *
 *   java -cp '.cache/pulsar-admin-libs/*' tests/integration/java/AdminWalk.java URL [TOKEN] [walk|probe]
 *
 * walk (the default) calls every PulsarAdmin method issue 21 lists, in an order where each call's
 * answer can be checked against the cluster's own view (it expects public/default to exist, with
 * topics, and three brokers); probe makes one read (getClusters), for the auth checks. Each call prints one JSON line: {"call", "args", "result"} on success, or
 * {"call", "args", "error" (the client's exception class), "status", "reason"} when the client
 * threw; tests/integration/test_pulsar_admin.py reads the lines and compares.
 */

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminBuilder;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.common.policies.data.BundlesData;
import org.apache.pulsar.common.policies.data.FailureDomain;

public class AdminWalk {
    static final ObjectMapper JSON = new ObjectMapper().configure(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS, true);
    static final String NS = "public/walk";
    static final String DEFAULT = "public/default";
    static final String TOPIC = "persistent://public/walk/orders";

    interface Call<T> {
        T run() throws Exception;
    }

    static <T> T step(String call, List<?> args, Call<T> body) throws Exception {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("call", call);
        line.put("args", args);
        T result = null;
        try {
            result = body.run();
            line.put("result", result);
        } catch (PulsarAdminException e) {
            line.put("error", e.getClass().getSimpleName());
            line.put("status", e.getStatusCode());
            line.put("reason", e.getMessage());
        }
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
        return result;
    }

    public static void main(String[] argv) throws Exception {
        String url = argv[0];
        String token = argv.length > 1 && !argv[1].isEmpty() ? argv[1] : null;
        String mode = argv.length > 2 ? argv[2] : "walk";
        PulsarAdminBuilder builder = PulsarAdmin.builder().serviceHttpUrl(url)
                .readTimeout(120, java.util.concurrent.TimeUnit.SECONDS)
                .requestTimeout(180, java.util.concurrent.TimeUnit.SECONDS);
        if (token != null) {
            builder.authentication(AuthenticationFactory.token(token));
        }
        try (PulsarAdmin admin = builder.build()) {
            if (mode.equals("probe")) {
                step("getClusters", List.of(), () -> admin.clusters().getClusters());
            } else {
                walk(admin);
            }
        }
    }

    static void walk(PulsarAdmin admin) throws Exception {
        List<String> clusters = step("getClusters", List.of(), () -> admin.clusters().getClusters());
        String cluster = clusters.get(0);
        List<String> brokers = step("getActiveBrokers", List.of(cluster),
                () -> admin.brokers().getActiveBrokers(cluster));
        step("getLeaderBroker", List.of(), () -> admin.brokers().getLeaderBroker());
        domains(admin, cluster, brokers);
        namespaces(admin);
        bundles(admin, brokers);
        affinity(admin);
        step("getLoadReport", List.of(), () -> admin.brokerStats().getLoadReport());
    }

    static void domains(PulsarAdmin admin, String cluster, List<String> brokers) throws Exception {
        Set<String> pair = new TreeSet<>(brokers.subList(0, 2));
        FailureDomain d1 = FailureDomain.builder().brokers(pair).build();
        step("createFailureDomain", List.of(cluster, "walk-d1", pair), () -> {
            admin.clusters().createFailureDomain(cluster, "walk-d1", d1);
            return null;
        });
        step("getFailureDomains", List.of(cluster), () -> admin.clusters().getFailureDomains(cluster));
        step("getFailureDomain", List.of(cluster, "walk-d1"), () -> admin.clusters().getFailureDomain(cluster, "walk-d1"));
        Set<String> taken = Set.of(brokers.get(1));
        step("createFailureDomain", List.of(cluster, "walk-d2", taken), () -> {
            admin.clusters().createFailureDomain(cluster, "walk-d2", FailureDomain.builder().brokers(taken).build());
            return null;
        });
        step("deleteFailureDomain", List.of(cluster, "walk-d1"), () -> {
            admin.clusters().deleteFailureDomain(cluster, "walk-d1");
            return null;
        });
        step("getFailureDomain", List.of(cluster, "walk-d1"), () -> admin.clusters().getFailureDomain(cluster, "walk-d1"));
        Set<String> last = Set.of(brokers.get(2));
        step("createFailureDomain", List.of(cluster, "walk-d3", last), () -> {
            admin.clusters().createFailureDomain(cluster, "walk-d3", FailureDomain.builder().brokers(last).build());
            return null;
        });
    }

    static void namespaces(PulsarAdmin admin) throws Exception {
        step("createNamespace", List.of(NS, 4), () -> {
            admin.namespaces().createNamespace(NS, 4);
            return null;
        });
        step("createNamespace", List.of(NS, 4), () -> {
            admin.namespaces().createNamespace(NS, 4);
            return null;
        });
        step("getNamespaces", List.of("public"), () -> admin.namespaces().getNamespaces("public"));
        step("getBundles", List.of(NS), () -> admin.namespaces().getBundles(NS));
        step("getBundles", List.of("public/nope"), () -> admin.namespaces().getBundles("public/nope"));
    }

    static void bundles(PulsarAdmin admin, List<String> brokers) throws Exception {
        String first = step("lookupTopic", List.of(TOPIC), () -> admin.lookups().lookupTopic(TOPIC));
        String range = step("getBundleRange", List.of(TOPIC), () -> admin.lookups().getBundleRange(TOPIC));
        step("unloadNamespaceBundle", List.of(NS, range), () -> {
            admin.namespaces().unloadNamespaceBundle(NS, range);
            return null;
        });
        step("lookupTopic", List.of(TOPIC), () -> admin.lookups().lookupTopic(TOPIC));
        String owner = step("lookupTopic", List.of(TOPIC), () -> admin.lookups().lookupTopic(TOPIC));
        String dst = brokers.stream().filter(b -> !owner.contains("//" + b + ":")).findFirst().get();
        step("unloadNamespaceBundle", List.of(NS, range, dst), () -> {
            admin.namespaces().unloadNamespaceBundle(NS, range, dst);
            return null;
        });
        step("lookupTopic", List.of(TOPIC), () -> admin.lookups().lookupTopic(TOPIC));
        step("unloadNamespaceBundle", List.of(NS, range, "nope"), () -> {
            admin.namespaces().unloadNamespaceBundle(NS, range, "nope");
            return null;
        });
        step("unloadNamespaceBundle", List.of(NS, "0x00000000_0x00000010"), () -> {
            admin.namespaces().unloadNamespaceBundle(NS, "0x00000000_0x00000010");
            return null;
        });
        step("splitNamespaceBundle", List.of(NS, range, false, "range_equally_divide"), () -> {
            admin.namespaces().splitNamespaceBundle(NS, range, false, "range_equally_divide");
            return null;
        });
        step("getBundles", List.of(NS), () -> admin.namespaces().getBundles(NS));
        // Pulsar splits at given positions only a bundle with two topics or more: public/default's.
        BundlesData busy = step("getBundles", List.of(DEFAULT), () -> admin.namespaces().getBundles(DEFAULT));
        long low = Long.decode(busy.getBoundaries().get(0)), high = Long.decode(busy.getBoundaries().get(1));
        String target = busy.getBoundaries().get(0) + "_" + busy.getBoundaries().get(1);
        List<Long> at = List.of(low + (high - low) / 3);
        step("splitNamespaceBundle", List.of(DEFAULT, target, true, "specified_positions_divide", at), () -> {
            admin.namespaces().splitNamespaceBundle(DEFAULT, target, true, "specified_positions_divide", at);
            return null;
        });
        step("getBundles", List.of(DEFAULT), () -> admin.namespaces().getBundles(DEFAULT));
        step("getBundles", List.of(NS), () -> admin.namespaces().getBundles(NS));
        step("getBundleRange", List.of(TOPIC), () -> admin.lookups().getBundleRange(TOPIC));
        step("lookupTopic", List.of(TOPIC), () -> admin.lookups().lookupTopic(TOPIC));
    }

    static void affinity(PulsarAdmin admin) throws Exception {
        step("setNamespaceAntiAffinityGroup", List.of(NS, "g1"), () -> {
            admin.namespaces().setNamespaceAntiAffinityGroup(NS, "g1");
            return null;
        });
        step("getNamespaceAntiAffinityGroup", List.of(NS), () -> admin.namespaces().getNamespaceAntiAffinityGroup(NS));
        step("deleteNamespaceAntiAffinityGroup", List.of(NS), () -> {
            admin.namespaces().deleteNamespaceAntiAffinityGroup(NS);
            return null;
        });
        step("getNamespaceAntiAffinityGroup", List.of(NS), () -> admin.namespaces().getNamespaceAntiAffinityGroup(NS));
        step("setNamespaceAntiAffinityGroup", List.of(NS, "g2"), () -> {
            admin.namespaces().setNamespaceAntiAffinityGroup(NS, "g2");
            return null;
        });
    }
}
