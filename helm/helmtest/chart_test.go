package helmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/doclog/doclog/app"
	"github.com/doclog/doclog/internal/config"
)

var roles = []string{"ingest", "executor", "projectors", "readstore"}

func TestLint(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{
		"default":    nil,
		"production": {"-f", productionValues},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, err := runHelm(t, append([]string{"lint", "--strict", chartDir}, args...)...)
			require.NoError(t, err, out)
			require.Contains(t, out, "1 chart(s) linted, 0 chart(s) failed")
		})
	}
}

func TestDefaultValuesRender(t *testing.T) {
	t.Parallel()
	objs := render(t)
	require.Equal(t, map[string]int{
		"ConfigMap":               1,
		"Deployment":              4,
		"Service":                 2,
		"Job":                     1,
		"HorizontalPodAutoscaler": 1,
		"PodDisruptionBudget":     4,
	}, kinds(objs), "no ServiceMonitor by default")

	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	for key, want := range map[string]string{
		"DOCLOG_TOPICS_JOBS_PARTITIONS":        "12",
		"DOCLOG_TOPICS_WRITE_READY_PARTITIONS": "12",
		"DOCLOG_TOPICS_REPLICATION_FACTOR":     "3",
		"DOCLOG_TOPICS_MIN_INSYNC_REPLICAS":    "2",
		"DOCLOG_TOPICS_JOBS_RETENTION":         "168h",
		"DOCLOG_TOPICS_DEAD_LETTER_RETENTION":  "720h",
		"DOCLOG_RETENTION_JOB_RESULTS":         "720h",
		"DOCLOG_KAFKA_SEEDS":                   "kafka:9092",
		"DOCLOG_KAFKA_TLS_ENABLED":             "false",
		"DOCLOG_PROJECTORS":                    "docview,indexer",
		"DOCLOG_OPS_ADDR":                      ":9090",
	} {
		require.Equal(t, want, cm.Data[key], key)
	}
	for key := range cm.Data {
		require.Regexp(t, `^DOCLOG_[A-Z0-9_]+$`, key)
		require.NotContains(t, key, "PASSWORD", "credentials never go into the ConfigMap")
	}

	checkDeployments(t, objs, roles)

	// Without SASL, TLS, ClickHouse or auth, the only secret is Postgres'.
	for _, d := range all[*appsv1.Deployment](objs) {
		checkSecretFiles(t, d.Name, d.Spec.Template.Spec, cm, map[string]secretRef{
			"DOCLOG_DATABASE_URL_FILE": {"doclog-postgres", "DATABASE_URL"},
		})
		checkNoHTTPTLS(t, d)
	}

	hpa := find[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler", "doclog-executor")
	require.Equal(t, int32(12), hpa.Spec.MaxReplicas)
	require.Equal(t, int32(2), *hpa.Spec.MinReplicas)
	checkHPA(t, objs, cm)

	job := find[*batchv1.Job](t, objs, "Job", "doclog-migrate")
	checkMigrationJob(t, job, "doclog-postgres")

	checkPDBs(t, objs, roles)
	checkServices(t, objs)
}

func TestProductionValuesRender(t *testing.T) {
	t.Parallel()
	objs := render(t, "-f", productionValues)
	require.Equal(t, map[string]int{
		"ConfigMap":               1,
		"Deployment":              4,
		"Service":                 3,
		"Job":                     1,
		"HorizontalPodAutoscaler": 1,
		"PodDisruptionBudget":     4,
		"ServiceMonitor":          1,
	}, kinds(objs))

	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	require.Equal(t, "24", cm.Data["DOCLOG_TOPICS_JOBS_PARTITIONS"])
	require.Equal(t, "SCRAM-SHA-512", cm.Data["DOCLOG_KAFKA_SASL_MECHANISM"])
	require.Equal(t, "true", cm.Data["DOCLOG_KAFKA_TLS_ENABLED"])
	require.Equal(t, "/etc/doclog/kafka-tls/ca.crt", cm.Data["DOCLOG_KAFKA_TLS_CA_FILE"])
	require.Equal(t, "docview,indexer,analytics", cm.Data["DOCLOG_PROJECTORS"], "ClickHouse turns the analytics projector on")
	require.Equal(t, "json", cm.Data["DOCLOG_LOG_ENCODING"])

	checkDeployments(t, objs, roles)
	for _, d := range all[*appsv1.Deployment](objs) {
		c := d.Spec.Template.Spec.Containers[0]
		checkSecretFiles(t, d.Name, d.Spec.Template.Spec, cm, map[string]secretRef{
			"DOCLOG_DATABASE_URL_FILE":        {"doclog-postgres", "DATABASE_URL"},
			"DOCLOG_KAFKA_SASL_USERNAME_FILE": {"doclog-kafka-sasl", "username"},
			"DOCLOG_KAFKA_SASL_PASSWORD_FILE": {"doclog-kafka-sasl", "password"},
			"DOCLOG_CLICKHOUSE_URL_FILE":      {"doclog-clickhouse", "CLICKHOUSE_URL"},
			"DOCLOG_AUTH_TOKENS_FILE":         {"doclog-api-tokens", "tokens"},
		})
		require.True(t, hasMount(c, "kafka-tls", "/etc/doclog/kafka-tls"), d.Name)
		require.True(t, hasMount(c, "postgres-ca", "/etc/doclog/postgres-ca"), d.Name)
		require.Equal(t, "platform/doclog:0.1.0", c.Image)
		require.Equal(t, "regcred", d.Spec.Template.Spec.ImagePullSecrets[0].Name)
	}
	exec := find[*appsv1.Deployment](t, objs, "Deployment", "doclog-executor")
	require.Equal(t, "doclog", exec.Spec.Template.Spec.NodeSelector["node-pool"])
	require.Len(t, exec.Spec.Template.Spec.Tolerations, 1)

	hpa := find[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler", "doclog-executor")
	require.Equal(t, int32(24), hpa.Spec.MaxReplicas)
	require.Equal(t, int32(3), *hpa.Spec.MinReplicas)
	checkHPA(t, objs, cm)

	checkMigrationJob(t, find[*batchv1.Job](t, objs, "Job", "doclog-migrate"), "doclog-postgres")
	checkPDBs(t, objs, roles)
	checkServices(t, objs)

	// The ServiceMonitor selects the headless metrics Service, which selects
	// every role's pods (and not the migration Job's) on the ops port.
	sm := find[*serviceMonitor](t, objs, "ServiceMonitor", "doclog")
	require.Equal(t, "kube-prometheus-stack", sm.Labels["release"])
	require.Len(t, sm.Spec.Endpoints, 1)
	ep := sm.Spec.Endpoints[0]
	require.Equal(t, "ops", ep.Port)
	require.Equal(t, "/metrics", ep.Path)
	require.Equal(t, "15s", ep.Interval)
	require.Equal(t, "role", ep.Relabelings[0].TargetLabel)
	metrics := find[*corev1.Service](t, objs, "Service", "doclog-metrics")
	require.Equal(t, corev1.ClusterIPNone, metrics.Spec.ClusterIP)
	require.True(t, labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(metrics.Labels)))
	require.Equal(t, "ops", metrics.Spec.Ports[0].Name)
	sel := labels.SelectorFromSet(metrics.Spec.Selector)
	for _, d := range all[*appsv1.Deployment](objs) {
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), d.Name)
	}
	require.False(t, sel.Matches(labels.Set(find[*batchv1.Job](t, objs, "Job", "doclog-migrate").Spec.Template.Labels)))
}

// TestValuesMistakesFailRendering: a values mistake stops `helm install`
// with a sentence naming the setting, rather than deploying idle or broken
// pods.
func TestValuesMistakesFailRendering(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"hpa beyond partitions": {
			[]string{"--set", "executor.autoscaling.maxReplicas=13"},
			"executor.autoscaling.maxReplicas (13) exceeds topics.jobsPartitions (12)",
		},
		"production hpa beyond fewer partitions": {
			[]string{"-f", productionValues, "--set", "topics.jobsPartitions=16"},
			"executor.autoscaling.maxReplicas (24) exceeds topics.jobsPartitions (16)",
		},
		"replicas beyond partitions without hpa": {
			[]string{"--set", "executor.autoscaling.enabled=false", "--set", "executor.replicas=13"},
			"executor.replicas (13) exceeds topics.jobsPartitions (12)",
		},
		"hpa min above max": {
			[]string{"--set", "executor.autoscaling.minReplicas=5", "--set", "executor.autoscaling.maxReplicas=4"},
			"executor.autoscaling.minReplicas (5) exceeds maxReplicas (4)",
		},
		"projectors beyond write-ready partitions": {
			[]string{"--set", "topics.writeReadyPartitions=2", "--set", "projectors.replicas=3"},
			"projectors.replicas (3) exceeds the write-ready partition count (2)",
		},
		"min insync above replication": {
			[]string{"--set", "topics.replicationFactor=1"},
			"topics.minInsyncReplicas (2) exceeds topics.replicationFactor (1)",
		},
		"job results expire before the jobs topic": {
			[]string{"--set", "retention.jobResults=100h"},
			"retention.jobResults (100h) is shorter than topics.jobsRetention (168h)",
		},
		"pool too small": {
			[]string{"--set", "postgres.maxConns=1"},
			"postgres.maxConns must be at least 2",
		},
		"pool minimum above its size": {
			[]string{"--set", "postgres.minConns=11"},
			"postgres.minConns (11) exceeds postgres.maxConns (10)",
		},
		"connect timeout not a Go duration": {
			[]string{"--set", "postgres.connectTimeout=10sec"},
			"does not match pattern",
		},
		// values.schema.json refuses what no template could notice.
		"misspelt key": {
			[]string{"--set", "executor.autoscalling.enabled=false"},
			"additional properties 'autoscalling' not allowed",
		},
		"retention not a Go duration": {
			[]string{"--set", "topics.jobsRetention=7d"},
			"'7d' does not match pattern",
		},
		"unknown projector": {
			[]string{"--set", "projectors.names={docview,search}"},
			"value must be one of 'docview', 'indexer', 'analytics'",
		},
		"extra setting that is not a DOCLOG_ variable": {
			[]string{"--set", "extraConfig.LOG=1"},
			"invalid propertyName 'LOG'",
		},
		"no kafka seeds": {
			[]string{"--set", "kafka.seeds=null"},
			"kafka.seeds is required",
		},
		"no postgres secret": {
			[]string{"--set", "postgres.existingSecret="},
			"postgres.existingSecret is required",
		},
		"clickhouse without secret": {
			[]string{"--set", "clickhouse.enabled=true"},
			"clickhouse.existingSecret is required",
		},
		"sasl without secret": {
			[]string{"--set", "kafka.sasl.mechanism=PLAIN"},
			"kafka.sasl.existingSecret is required",
		},
		"unknown sasl mechanism": {
			[]string{"--set", "kafka.sasl.mechanism=GSSAPI", "--set", "kafka.sasl.existingSecret=s"},
			`kafka.sasl.mechanism "GSSAPI" is not one of`,
		},
		"http tls options without its secret": {
			[]string{"--set", "httpTLS.ops=true"},
			"httpTLS.clientCAKey and httpTLS.ops need httpTLS.existingSecret",
		},
		"http tls without a key name": {
			[]string{"--set", "httpTLS.existingSecret=s", "--set", "httpTLS.keyKey="},
			"httpTLS.certKey and httpTLS.keyKey must name",
		},
		"token secret without a key": {
			[]string{"--set", "auth.existingSecret=s", "--set", "auth.tokensKey="},
			"none of auth.tokensKey, auth.writeTokensKey, auth.readTokensKey",
		},
		"client cert without key": {
			[]string{"--set", "kafka.tls.enabled=true", "--set", "kafka.tls.existingSecret=s", "--set", "kafka.tls.certKey=tls.crt"},
			"kafka.tls.certKey and kafka.tls.keyKey go together",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := runHelm(t, append([]string{"template", "doclog", chartDir}, tc.args...)...)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRolesEnableSeparately(t *testing.T) {
	t.Parallel()
	// The read side alone needs no Kafka: readstore reads Postgres.
	objs := render(t, "--set", "ingest.enabled=false", "--set", "executor.enabled=false",
		"--set", "projectors.enabled=false", "--set", "kafka.seeds=null", "--set", "migrations.enabled=false")
	require.Equal(t, map[string]int{"ConfigMap": 1, "Deployment": 1, "Service": 1, "PodDisruptionBudget": 1}, kinds(objs))
	checkDeployments(t, objs, []string{"readstore"})

	// The executor without its HPA has a fixed replica count and no HPA.
	objs = render(t, "--set", "executor.autoscaling.enabled=false", "--set", "executor.replicas=3",
		"--set", "executor.pdb.enabled=false", "--set", "ingest.enabled=false")
	require.Zero(t, kinds(objs)["HorizontalPodAutoscaler"])
	require.Equal(t, 2, kinds(objs)["PodDisruptionBudget"], "projectors and readstore")
	exec := find[*appsv1.Deployment](t, objs, "Deployment", "doclog-executor")
	require.Equal(t, int32(3), *exec.Spec.Replicas)
	checkDeployments(t, objs, []string{"executor", "projectors", "readstore"})
}

// checkDeployments checks that exactly the given roles have a Deployment,
// each running `doclog serve --roles=<role>` with probes, resources and the
// hardened security context.
func checkDeployments(t *testing.T, objs []object, want []string) {
	t.Helper()
	deps := all[*appsv1.Deployment](objs)
	var got []string
	for _, d := range deps {
		role := d.Labels["app.kubernetes.io/component"]
		got = append(got, role)
		require.Equal(t, "doclog-"+role, d.Name)
		require.True(t, labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)), d.Name)
		pod := d.Spec.Template.Spec
		require.Len(t, pod.Containers, 1, d.Name)
		require.False(t, *pod.AutomountServiceAccountToken)
		require.True(t, *pod.SecurityContext.RunAsNonRoot)
		require.NotEmpty(t, d.Spec.Template.Annotations["checksum/config"])
		for _, c := range pod.Containers {
			require.Equal(t, []string{"doclog"}, c.Command, d.Name)
			require.Equal(t, []string{"serve", "--roles=" + role}, c.Args, d.Name)
			checkProbes(t, d.Name, c)
			require.False(t, c.Resources.Requests.Cpu().IsZero(), d.Name)
			require.False(t, c.Resources.Requests.Memory().IsZero(), d.Name)
			require.False(t, c.Resources.Limits.Memory().IsZero(), d.Name)
			// Sized for 2-core nodes: a single pod never asks for a whole node.
			require.LessOrEqual(t, c.Resources.Requests.Cpu().MilliValue(), int64(1000), d.Name)
			require.LessOrEqual(t, c.Resources.Limits.Cpu().MilliValue(), int64(2000), d.Name)
			require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
			require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
			require.Equal(t, "doclog", c.EnvFrom[0].ConfigMapRef.Name)
			require.True(t, hasMemLimitFromContainer(c), "%s: GOMEMLIMIT is the container's memory limit", d.Name)
			api := role == "ingest" || role == "readstore"
			require.Equal(t, api, hasPort(c, "http", 8080), d.Name)
		}
	}
	require.ElementsMatch(t, want, got)
}

func checkProbes(t *testing.T, name string, c corev1.Container) {
	t.Helper()
	require.True(t, hasPort(c, "ops", 9090), "%s serves /metrics on the ops port", name)
	for probe, path := range map[*corev1.Probe]string{
		c.LivenessProbe:  "/healthz",
		c.ReadinessProbe: "/readyz",
		c.StartupProbe:   "/healthz",
	} {
		require.NotNil(t, probe, name)
		require.NotNil(t, probe.HTTPGet, name)
		require.Equal(t, path, probe.HTTPGet.Path, name)
		require.Equal(t, "ops", probe.HTTPGet.Port.String(), name)
		// The process bounds each readiness check at 2s; the probe must
		// wait longer than that to see the 503 rather than a timeout.
		require.Greater(t, probe.TimeoutSeconds, int32(2), name)
	}
}

// checkHPA checks the HPA targets the executor Deployment, which leaves its
// replicas to it, and never exceeds the jobs topic's partitions.
func checkHPA(t *testing.T, objs []object, cm *corev1.ConfigMap) {
	t.Helper()
	hpa := find[*autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler", "doclog-executor")
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	exec := find[*appsv1.Deployment](t, objs, "Deployment", hpa.Spec.ScaleTargetRef.Name)
	require.Equal(t, "executor", exec.Labels["app.kubernetes.io/component"])
	require.Nil(t, exec.Spec.Replicas, "the HPA owns the executor's replica count")
	partitions, err := strconv.Atoi(cm.Data["DOCLOG_TOPICS_JOBS_PARTITIONS"])
	require.NoError(t, err)
	require.LessOrEqual(t, int(hpa.Spec.MaxReplicas), partitions)
	require.LessOrEqual(t, *hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	require.Equal(t, corev1.ResourceCPU, hpa.Spec.Metrics[0].Resource.Name)
}

func checkMigrationJob(t *testing.T, job *batchv1.Job, secret string) {
	t.Helper()
	require.Equal(t, "pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	require.Equal(t, "before-hook-creation,hook-succeeded", job.Annotations["helm.sh/hook-delete-policy"])
	require.NotEmpty(t, job.Annotations["helm.sh/hook-weight"])
	pod := job.Spec.Template.Spec
	require.Equal(t, corev1.RestartPolicyNever, pod.RestartPolicy)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.Equal(t, []string{"doclog"}, c.Command)
	require.Equal(t, []string{"migrate"}, c.Args)
	// A pre-install hook runs before the release's ConfigMap exists.
	require.Empty(t, c.EnvFrom, "the hook must not depend on the chart's own ConfigMap")
	checkSecretFiles(t, job.Name, pod, nil, map[string]secretRef{"DOCLOG_DATABASE_URL_FILE": {secret, "DATABASE_URL"}})
	require.NotNil(t, job.Spec.BackoffLimit)
	require.NotNil(t, job.Spec.ActiveDeadlineSeconds)
}

func checkPDBs(t *testing.T, objs []object, want []string) {
	t.Helper()
	pdbs := all[*policyv1.PodDisruptionBudget](objs)
	require.Len(t, pdbs, len(want))
	for _, p := range pdbs {
		require.NotNil(t, p.Spec.MaxUnavailable)
		d := find[*appsv1.Deployment](t, objs, "Deployment", p.Name)
		sel := labels.SelectorFromSet(p.Spec.Selector.MatchLabels)
		require.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), p.Name)
		for _, other := range all[*appsv1.Deployment](objs) {
			if other.Name != d.Name {
				require.False(t, sel.Matches(labels.Set(other.Spec.Template.Labels)), "%s selects %s", p.Name, other.Name)
			}
		}
	}
}

// checkServices checks that the API Services route to their role's http
// port and to no other role.
func checkServices(t *testing.T, objs []object) {
	t.Helper()
	for _, role := range []string{"ingest", "readstore"} {
		svc := find[*corev1.Service](t, objs, "Service", "doclog-"+role)
		require.Equal(t, "http", svc.Spec.Ports[0].TargetPort.String())
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for _, d := range all[*appsv1.Deployment](objs) {
			require.Equal(t, d.Name == svc.Name, sel.Matches(labels.Set(d.Spec.Template.Labels)), "%s vs %s", svc.Name, d.Name)
		}
	}
}

// TestConfigReachesDoclog checks every variable the chart sets against the
// ones `doclog serve` reads (its --help names DOCLOG_<FLAG> for each flag),
// so a renamed flag cannot leave the chart setting a variable nobody reads.
func TestConfigReachesDoclog(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "doclog")
	build := exec.Command("go", "build", "-o", bin, "./cmd/doclog")
	build.Dir = repoRoot(t)
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	require.NoError(t, err, string(help))
	read := map[string]bool{}
	for _, m := range regexp.MustCompile(`\(env (DOCLOG_[A-Z0-9_]+)(?:, or (DOCLOG_[A-Z0-9_]+_FILE) naming a file that holds it)?\)`).FindAllStringSubmatch(string(help), -1) {
		read[m[1]] = true
		if m[2] != "" {
			read[m[2]] = true
		}
	}
	require.True(t, read["DOCLOG_DATABASE_URL"], "parsed the flags from:\n%s", help)
	require.True(t, read["DOCLOG_DATABASE_URL_FILE"], "parsed the secrets' files from:\n%s", help)
	// The Go runtime reads its own soft memory limit.
	read["GOMEMLIMIT"] = true

	for _, args := range [][]string{nil, {"-f", productionValues}, {"--set", "extraConfig.DOCLOG_MIGRATE=auto"}, httpTLSValues,
		{"--set", "signatures.existingSecret=keys", "--set", "signatures.policies.acme=required"},
		{"--set", "tuning.executor.jobTimeout=30s", "--set", "tuning.projectors.reconcileInterval=-1s"}} {
		objs := render(t, args...)
		for key := range find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog").Data {
			require.True(t, read[key], "the ConfigMap sets %s, which doclog serve does not read", key)
		}
		for _, d := range all[*appsv1.Deployment](objs) {
			for _, name := range envNames(d.Spec.Template.Spec.Containers[0]) {
				require.True(t, read[name], "%s sets %s, which doclog serve does not read", d.Name, name)
			}
		}
	}
}

func TestExtraConfigOverridesTheChart(t *testing.T) {
	t.Parallel()
	objs := render(t, "--set", "extraConfig.DOCLOG_LOG_LEVEL=debug", "--set", "extraConfig.DOCLOG_MIGRATE=auto")
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	require.Equal(t, "debug", cm.Data["DOCLOG_LOG_LEVEL"])
	require.Equal(t, "auto", cm.Data["DOCLOG_MIGRATE"])
}

// secretRef is a key of a Secret.
type secretRef struct{ secret, key string }

// checkSecretFiles checks that a pod gets its credentials as files and
// only so: each variable of want names a file in the read-only "secrets"
// mount, projected from that Secret's key; no variable of the container or
// the ConfigMap (cm, if not nil) holds a secret, or takes one from a
// Secret; and no variable that would is set at all.
func checkSecretFiles(t *testing.T, name string, pod corev1.PodSpec, cm *corev1.ConfigMap, want map[string]secretRef) {
	t.Helper()
	c := pod.Containers[0]
	plain := map[string]bool{}
	for _, f := range app.SecretFlags {
		plain[config.EnvName(f)] = true
	}
	for _, from := range c.EnvFrom {
		require.Nil(t, from.SecretRef, "%s takes variables from a Secret", name)
	}
	files := map[string]string{}
	for _, e := range c.Env {
		require.False(t, plain[e.Name], "%s passes the secret %s as a variable", name, e.Name)
		if e.ValueFrom != nil {
			require.Nil(t, e.ValueFrom.SecretKeyRef, "%s takes %s from a Secret into its environment", name, e.Name)
		}
		if strings.HasSuffix(e.Name, config.FileSuffix) {
			files[e.Name] = e.Value
		}
	}
	if cm != nil {
		for key := range cm.Data {
			require.False(t, plain[key], "the ConfigMap holds the secret %s", key)
		}
	}
	require.Len(t, files, len(want), "%s: %v", name, files)

	mount := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "secrets" })
	require.GreaterOrEqual(t, mount, 0, "%s mounts no secrets volume", name)
	require.True(t, c.VolumeMounts[mount].ReadOnly, name)
	require.Empty(t, c.VolumeMounts[mount].SubPath, "%s: a subPath mount never sees a rotated Secret", name)
	dir := c.VolumeMounts[mount].MountPath
	vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "secrets" })
	require.GreaterOrEqual(t, vol, 0, name)
	projected := pod.Volumes[vol].Projected
	require.NotNil(t, projected, name)
	require.Equal(t, int32(0o440), *projected.DefaultMode, "%s: the credentials are readable by the pod's group alone", name)
	projects := map[string]secretRef{} // path in the volume -> where it comes from
	for _, src := range projected.Sources {
		require.NotNil(t, src.Secret, name)
		for _, item := range src.Secret.Items {
			projects[item.Path] = secretRef{src.Secret.Name, item.Key}
		}
	}
	for variable, ref := range want {
		path, ok := files[variable]
		require.True(t, ok, "%s lacks %s", name, variable)
		rel, found := strings.CutPrefix(path, dir+"/")
		require.True(t, found, "%s: %s=%s is not in the secrets mount %s", name, variable, path, dir)
		require.Equal(t, ref, projects[rel], "%s: %s", name, variable)
	}
}

// httpTLSValues serve both APIs and the ops port over TLS from a
// cert-manager Secret, with mutual TLS.
var httpTLSValues = []string{"--set", "httpTLS.existingSecret=doclog-http-tls", "--set", "httpTLS.clientCAKey=ca.crt", "--set", "httpTLS.ops=true"}

// checkNoHTTPTLS checks a Deployment serves plain HTTP: no certificate
// mounted, probes over HTTP.
func checkNoHTTPTLS(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	require.False(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "http-tls" }), d.Name)
	for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		require.Empty(t, p.HTTPGet.Scheme, d.Name)
	}
}

// The HTTP servers' certificate comes from a Secret mounted whole (a
// renewal reaches the files doclog re-reads), named to doclog through the
// ConfigMap; with ops TLS the probes and the ServiceMonitor use HTTPS.
func TestHTTPTLSFromSecret(t *testing.T) {
	t.Parallel()
	objs := render(t, append([]string{"-f", productionValues, "--set", "serviceMonitor.tlsConfig.serverName=doclog"}, httpTLSValues...)...)
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	require.Equal(t, "/etc/doclog/http-tls/tls.crt", cm.Data["DOCLOG_TLS_CERT_FILE"])
	require.Equal(t, "/etc/doclog/http-tls/tls.key", cm.Data["DOCLOG_TLS_KEY_FILE"])
	require.Equal(t, "/etc/doclog/http-tls/ca.crt", cm.Data["DOCLOG_TLS_CLIENT_CA_FILE"])
	require.Equal(t, "true", cm.Data["DOCLOG_OPS_TLS_ENABLED"])
	checkDeployments(t, objs, roles)
	for _, d := range all[*appsv1.Deployment](objs) {
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		// Every role: the ConfigMap is shared, and each serves the ops port.
		require.True(t, hasMount(c, "http-tls", "/etc/doclog/http-tls"), d.Name)
		for _, m := range c.VolumeMounts {
			require.Empty(t, m.SubPath, "%s: a subPath mount never sees a renewed certificate", d.Name)
		}
		vol := pod.Volumes[slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "http-tls" })]
		require.Equal(t, "doclog-http-tls", vol.Secret.SecretName)
		var paths []string
		for _, item := range vol.Secret.Items {
			require.Equal(t, item.Key, item.Path)
			paths = append(paths, item.Path)
		}
		require.ElementsMatch(t, []string{"tls.crt", "tls.key", "ca.crt"}, paths)
		for _, p := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			require.Equal(t, corev1.URISchemeHTTPS, p.HTTPGet.Scheme, d.Name)
		}
	}
	sm := find[*serviceMonitor](t, objs, "ServiceMonitor", "doclog")
	require.Equal(t, "https", sm.Spec.Endpoints[0].Scheme)
	require.Equal(t, "doclog", sm.Spec.Endpoints[0].TLSConfig["serverName"])

	// Without ops TLS the APIs alone serve HTTPS.
	objs = render(t, "--set", "httpTLS.existingSecret=doclog-http-tls")
	cm = find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	require.Equal(t, "/etc/doclog/http-tls/tls.crt", cm.Data["DOCLOG_TLS_CERT_FILE"])
	require.NotContains(t, cm.Data, "DOCLOG_TLS_CLIENT_CA_FILE")
	require.NotContains(t, cm.Data, "DOCLOG_OPS_TLS_ENABLED")
	for _, d := range all[*appsv1.Deployment](objs) {
		require.Empty(t, d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme, d.Name)
	}
}

// Read and write token keys are projected beside the older list; a Secret
// with only the new keys drops the older one.
func TestTokenFiles(t *testing.T) {
	t.Parallel()
	objs := render(t, "--set", "auth.existingSecret=doclog-api-tokens", "--set", "auth.tokensKey=",
		"--set", "auth.writeTokensKey=write", "--set", "auth.readTokensKey=read")
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	for _, d := range all[*appsv1.Deployment](objs) {
		checkSecretFiles(t, d.Name, d.Spec.Template.Spec, cm, map[string]secretRef{
			"DOCLOG_DATABASE_URL_FILE":      {"doclog-postgres", "DATABASE_URL"},
			"DOCLOG_AUTH_WRITE_TOKENS_FILE": {"doclog-api-tokens", "write"},
			"DOCLOG_AUTH_READ_TOKENS_FILE":  {"doclog-api-tokens", "read"},
		})
	}
}

// The signature keys' Secret is mounted whole, 0440, every key of it a key
// file; the policies reach the flags as one type=policy list.
func TestSignatureKeysFromSecret(t *testing.T) {
	t.Parallel()
	objs := render(t, "--set", "signatures.existingSecret=doclog-signature-keys",
		"--set-json", `signatures.policies={"doclog/ledger":"required","acme/notes":"off"}`,
		"--set", "signatures.defaultPolicy=optional")
	cm := find[*corev1.ConfigMap](t, objs, "ConfigMap", "doclog")
	require.Equal(t, "/etc/doclog/signature-keys", cm.Data["DOCLOG_SIGNATURE_KEYS"])
	require.Equal(t, "acme/notes=off,doclog/ledger=required", cm.Data["DOCLOG_SIGNATURE_POLICY"])
	require.Equal(t, "optional", cm.Data["DOCLOG_SIGNATURE_DEFAULT_POLICY"])
	for _, d := range all[*appsv1.Deployment](objs) {
		pod := d.Spec.Template.Spec
		require.True(t, hasMount(pod.Containers[0], "signature-keys", "/etc/doclog/signature-keys"), d.Name)
		vol := pod.Volumes[slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == "signature-keys" })]
		require.Equal(t, "doclog-signature-keys", vol.Secret.SecretName)
		require.Empty(t, vol.Secret.Items, "%s: every key of the Secret is a signing key", d.Name)
		require.Equal(t, int32(0o440), *vol.Secret.DefaultMode, d.Name)
	}

	// By default: no keys, no list, and the default policy off.
	cm = find[*corev1.ConfigMap](t, render(t), "ConfigMap", "doclog")
	require.NotContains(t, cm.Data, "DOCLOG_SIGNATURE_KEYS")
	require.NotContains(t, cm.Data, "DOCLOG_SIGNATURE_POLICY")
	require.Equal(t, "off", cm.Data["DOCLOG_SIGNATURE_DEFAULT_POLICY"])

	_, err := runHelm(t, "template", "doclog", chartDir, "--set", "signatures.defaultPolicy=always")
	require.Error(t, err, "the schema refuses a policy it does not know")
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

// hasMemLimitFromContainer reports that GOMEMLIMIT comes from the
// container's memory limit.
func hasMemLimitFromContainer(c corev1.Container) bool {
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			return e.ValueFrom.ResourceFieldRef.Resource == "limits.memory"
		}
	}
	return false
}

func hasPort(c corev1.Container, name string, port int32) bool {
	return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return p.Name == name && p.ContainerPort == port
	})
}

func hasMount(c corev1.Container, name, path string) bool {
	return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == name && m.MountPath == path && m.ReadOnly
	})
}

// TestDecodeIsStrict guards the guard: a misspelt field must fail decoding,
// or the render tests above would prove nothing.
func TestDecodeIsStrict(t *testing.T) {
	t.Parallel()
	_, err := decode("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 2\n")
	require.ErrorContains(t, err, `unknown field "replica"`)
	_, err = decode("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: y\n")
	require.Error(t, err, "duplicate keys")
	_, err = decode("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n  endpoints:\n  - port: ops\n    honorLabels: true\n")
	require.ErrorContains(t, err, "honorLabels")
	_, err = decode("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: x\n")
	require.ErrorContains(t, err, "no API type for example.com/v1 Widget")
	objs, err := decode("# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	require.NoError(t, err)
	require.Len(t, objs, 1)
}

// TestDockerfileBuildsWhatTheChartRuns checks the image's structure lightly:
// there is no Docker engine to build it here, so the test makes sure the
// binaries the chart and the operator docs name are built statically and
// installed on the runtime image's PATH, as a non-root user.
func TestDockerfileBuildsWhatTheChartRuns(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err)
	df := string(raw)

	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)`).FindAllStringSubmatch(df, -1)
	require.GreaterOrEqual(t, len(froms), 2, "multi-stage")
	require.True(t, strings.HasPrefix(froms[0][1], "golang:1.26"), "builder is %s", froms[0][1])
	require.Contains(t, df, "CGO_ENABLED=0")
	require.Contains(t, df, "--mount=type=cache,target=/go/pkg/mod")
	for _, bin := range []string{"doclog", "doclogctl"} {
		require.Regexp(t, `go build [^\n]*-o /out/`+bin+` \./cmd/`+bin, df)
		require.Regexp(t, `COPY --from=build /out/`+bin+` /usr/local/bin/`+bin, df)
	}
	runtime := df[strings.LastIndex(df, "\nFROM "):]
	require.Regexp(t, `(?m)^USER 65532:65532$`, runtime, "the runtime stage runs as the chart's runAsUser")
	require.Contains(t, runtime, "/usr/local/bin", "the chart's command 'doclog' is looked up on PATH")

	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	require.Contains(t, string(ignore), ".cache", "the build context leaves out downloaded tools")
	require.Contains(t, string(ignore), ".git")
}
