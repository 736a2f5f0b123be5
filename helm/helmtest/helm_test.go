package helmtest

import (
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The helm the tests run: pinned so a chart that passes here passes for
// everyone, and fetched through the Go module proxy like every other
// dependency, so no separate download is needed.
const (
	helmModule  = "helm.sh/helm/v3"
	helmPackage = helmModule + "/cmd/helm"
	helmVersion = "v3.22.0"
)

var (
	helmOnce sync.Once
	helmBin  string
	helmErr  error
)

// repoRoot is the directory holding go.mod above the test's directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test directory")
		dir = parent
	}
}

// helm returns the path of the pinned helm binary, building it into
// <repo>/.cache/bin/helm when it is missing or another version. The first
// build on a cold module cache takes a few minutes (it downloads helm's
// dependencies); later runs reuse it.
func helm(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	helmOnce.Do(func() { helmBin, helmErr = ensureHelm(filepath.Join(root, ".cache", "bin")) })
	require.NoError(t, helmErr)
	return helmBin
}

func ensureHelm(dir string) (string, error) {
	bin := filepath.Join(dir, "helm")
	if info, err := buildinfo.ReadFile(bin); err == nil && info.Main.Path == helmModule && info.Main.Version == helmVersion {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	// Install into a fresh directory beside the target and rename, so a
	// concurrent run never sees a half-written binary.
	tmp, err := os.MkdirTemp(dir, "helm-install-")
	if err != nil {
		return "", fmt.Errorf("creating a directory to install helm in: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", helmPackage+"@"+helmVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("installing %s@%s: %w\n%s", helmPackage, helmVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), bin); err != nil {
		return "", fmt.Errorf("moving helm into %s: %w", dir, err)
	}
	return bin, nil
}

// runHelm runs helm with args from the repository root and returns its
// stdout; a failure is returned with stderr for tests that expect one.
func runHelm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin := helm(t)
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot(t)
	// Keep helm's caches and config away from the user's home.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("helm %s did not finish within 2 minutes", strings.Join(args, " "))
	}
	return stdout.String(), nil
}

const chartDir = "helm/doclog"

// productionValues is the production-like example shipped with the chart.
const productionValues = chartDir + "/ci/production-values.yaml"

// object is one rendered manifest, decoded strictly into its API type.
type object struct {
	Kind string
	Name string
	// Obj is a pointer to the typed object: *appsv1.Deployment, ...
	Obj any
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the chart renders. The CRD has no type in
// k8s.io/api; decoding strictly into this struct still catches a misspelt
// or misplaced field, and a field the chart starts using must be added here
// on purpose.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string         `json:"port"`
			Path          string         `json:"path"`
			Scheme        string         `json:"scheme"`
			TLSConfig     map[string]any `json:"tlsConfig"`
			Interval      string         `json:"interval"`
			ScrapeTimeout string         `json:"scrapeTimeout"`
			Relabelings   []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// newTyped returns an empty object of the API type for apiVersion and kind.
func newTyped(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "batch/v1/Job":
		return &batchv1.Job{}, nil
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &serviceMonitor{}, nil
	}
	return nil, fmt.Errorf("no API type for %s %s: add it to newTyped", apiVersion, kind)
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode splits helm's output into documents and decodes each strictly:
// an unknown or misplaced field, a bad quantity or a wrong type fails.
func decode(rendered string) ([]object, error) {
	var objs []object
	for _, doc := range docSeparator.Split(rendered, -1) {
		if isBlank(doc) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return nil, fmt.Errorf("reading the kind of a manifest: %w\n%s", err, doc)
		}
		obj, err := newTyped(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("decoding %s strictly: %w\n%s", tm.Kind, err, doc)
		}
		name := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().GetName()
		if name == "" {
			return nil, errors.New("a rendered " + tm.Kind + " has no name")
		}
		objs = append(objs, object{Kind: tm.Kind, Name: name, Obj: obj})
	}
	return objs, nil
}

func isBlank(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// render runs helm template on the chart with the given extra arguments
// (-f files, --set pairs) and decodes the result.
func render(t testing.TB, args ...string) []object {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "doclog", chartDir, "--namespace", "doclog"}, args...)...)
	require.NoError(t, err)
	objs, err := decode(out)
	require.NoError(t, err)
	return objs
}

// kinds counts the rendered objects by kind.
func kinds(objs []object) map[string]int {
	out := map[string]int{}
	for _, o := range objs {
		out[o.Kind]++
	}
	return out
}

// find returns the one object of that kind and name, typed.
func find[T any](t testing.TB, objs []object, kind, name string) T {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			v, ok := o.Obj.(T)
			require.True(t, ok, "%s %s has type %T", kind, name, o.Obj)
			return v
		}
	}
	t.Fatalf("no %s named %s among %v", kind, name, names(objs))
	panic("unreachable")
}

// all returns every object of the type T.
func all[T any](objs []object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.Obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func names(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind+"/"+o.Name)
	}
	return out
}
