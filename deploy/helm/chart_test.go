package helm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// helmModule is the pinned Helm, built from the Go module proxy.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

// object is one rendered manifest, decoded by kind.
type object struct {
	kind, name string
	value      any
}

// serviceMonitor and prometheusRule are the parts of the Prometheus
// Operator's resources the chart writes; decoding into them strictly
// catches a misspelt or misplaced field.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1ObjectMeta  `json:"metadata"`
	Spec       serviceMonitorSpc `json:"spec"`
}

type metav1ObjectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type serviceMonitorSpc struct {
	JobLabel string `json:"jobLabel"`
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Endpoints []struct {
		Port      string `json:"port"`
		Path      string `json:"path"`
		Interval  string `json:"interval"`
		BasicAuth *struct {
			Username corev1.SecretKeySelector `json:"username"`
			Password corev1.SecretKeySelector `json:"password"`
		} `json:"basicAuth"`
	} `json:"endpoints"`
}

type prometheusRule struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   metav1ObjectMeta `json:"metadata"`
	Spec       ruleFile         `json:"spec"`
}

// ruleFile is a Prometheus rule file, the PrometheusRule's spec.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestChartLintsAndRendersBothShapes lints and renders the chart as a
// single node (the defaults) and as a cluster (ci/cluster-values.yaml),
// decodes every object strictly, and checks what an operator relies on:
// a StatefulSet with a volume claim for the store, probes, a non-root
// read-only container, the secrets in the environment, and in cluster mode
// the etcd store, an advertise URL from the pod IP and a disruption
// budget. It fails, never skips, when Helm cannot be built or run. The
// first run builds Helm (minutes); later ones take seconds.
func TestChartLintsAndRendersBothShapes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	chart, err := filepath.Abs("rscoord")
	if err != nil {
		t.Fatal(err)
	}
	flags := serveFlags(t)
	for _, shape := range []struct {
		name    string
		values  []string
		cluster bool
	}{
		{name: "single node"},
		{name: "cluster", values: []string{"--values", filepath.Join(chart, "ci", "cluster-values.yaml")}, cluster: true},
	} {
		t.Run(shape.name, func(t *testing.T) {
			run(ctx, t, append([]string{"lint", "--strict", chart}, shape.values...)...)
			out := run(ctx, t, append([]string{"template", "rel", chart, "--namespace", "ns"}, shape.values...)...)
			objs := decode(t, out)
			checkShape(t, objs, shape.cluster, flags)
		})
	}
	t.Run("refused shapes", func(t *testing.T) {
		for _, set := range []string{"cluster.enabled=true", "cluster.enabled=true,cluster.replicas=1,cluster.etcd.endpoints={http://e:2379}",
			"auth.tokenSecret=short"} {
			cmd := helmCommand(ctx, "template", "rel", chart, "--set", set)
			if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "execution error") {
				t.Errorf("--set %s renders (%v):\n%.300s", set, err, out)
			}
		}
	})
}

// helmCommand is the pinned Helm under go run: the go command builds it
// once from the module proxy and reuses the cached binary after that.
func helmCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", helmModule}, args...)...)
	// Outside the repository's module: go run pkg@version needs no go.mod.
	cmd.Dir = os.TempDir()
	return cmd
}

func run(ctx context.Context, t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := helmCommand(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run %s %s (needs the Go module proxy or a filled module cache): %v\n%s\n%s",
			helmModule, strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// decode splits helm template's output into documents and decodes each
// into its API type, refusing unknown fields.
func decode(t *testing.T, out []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^#.*$`).ReplaceAllString(doc, "")) == "" {
			continue
		}
		raw, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("not YAML: %v\n%s", err, doc)
		}
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		var v any
		switch head.Kind {
		case "StatefulSet":
			v = &appsv1.StatefulSet{}
		case "Service":
			v = &corev1.Service{}
		case "Secret":
			v = &corev1.Secret{}
		case "PodDisruptionBudget":
			v = &policyv1.PodDisruptionBudget{}
		case "ServiceMonitor":
			v = &serviceMonitor{}
		case "PrometheusRule":
			v = &prometheusRule{}
		default:
			t.Errorf("rendered a %s (%s) the test does not know", head.Kind, head.Metadata.Name)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Errorf("%s %s does not decode strictly: %v\n%s", head.Kind, head.Metadata.Name, err, doc)
			continue
		}
		objs = append(objs, object{kind: head.Kind, name: head.Metadata.Name, value: v})
	}
	return objs
}

func find[T any](t *testing.T, objs []object, kind string) []T {
	t.Helper()
	var out []T
	for _, o := range objs {
		if o.kind == kind {
			out = append(out, o.value.(T))
		}
	}
	return out
}

func checkShape(t *testing.T, objs []object, cluster bool, flags map[string]bool) {
	sets := find[*appsv1.StatefulSet](t, objs, "StatefulSet")
	if len(sets) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(sets))
	}
	ss := sets[0]
	wantReplicas := int32(1)
	if cluster {
		wantReplicas = 3
	}
	if ss.Spec.Replicas == nil || *ss.Spec.Replicas != wantReplicas {
		t.Errorf("replicas %v, want %d", ss.Spec.Replicas, wantReplicas)
	}
	if len(ss.Spec.VolumeClaimTemplates) != 1 || ss.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("volumeClaimTemplates %+v, want one named data", ss.Spec.VolumeClaimTemplates)
	}
	pod := ss.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "data" && m.MountPath == "/data" }) {
		t.Errorf("the data volume is not mounted at /data: %+v", c.VolumeMounts)
	}
	probe := func(name string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", name, p, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("startup", c.StartupProbe, "/healthz")
	sc, psc := c.SecurityContext, pod.SecurityContext
	if sc == nil || psc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.RunAsUser == nil || *psc.RunAsUser == 0 || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security %+v, pod %+v: want non-root, read-only root, no escalation, no capabilities", sc, psc)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	secrets := find[*corev1.Secret](t, objs, "Secret")
	for _, name := range []string{"RSCOORD_ADMIN_PASSWORD", "RSCOORD_TOKEN_SECRET"} {
		e, ok := env[name]
		if !ok || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s is not taken from a Secret: %+v", name, e)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if !slices.ContainsFunc(secrets, func(s *corev1.Secret) bool { _, ok := s.Data[ref.Key]; return s.Name == ref.Name && ok }) {
			t.Errorf("%s names %s/%s, which the chart does not render", name, ref.Name, ref.Key)
		}
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %v, want serve …", c.Args)
	}
	args := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, _ := strings.Cut(a, "=")
		if !flags[name] {
			t.Errorf("argument %s is not a serve flag of the documented table", a)
		}
		args[name] = value
	}
	if args["--data-dir"] != "/data" || !strings.HasPrefix(args["--listen"], "0.0.0.0:") {
		t.Errorf("args %v: want --data-dir /data and --listen on all interfaces", c.Args)
	}
	pdbs := find[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget")
	if !cluster {
		if _, ok := args["--store"]; ok || len(pdbs) != 0 {
			t.Errorf("single node: args %v, %d disruption budgets; want Pebble and none", c.Args, len(pdbs))
		}
		return
	}
	if args["--store"] != "etcd" || args["--etcd-endpoints"] == "" || args["--advertise-url"] != "http://$(POD_IP):8080" {
		t.Errorf("cluster args %v: want --store etcd, the endpoints and the advertise URL from the pod IP", c.Args)
	}
	if e := env["POD_IP"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("POD_IP %+v, want the downward API's status.podIP", e)
	}
	if args["--users"] == "" || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == "users" && strings.HasPrefix(args["--users"], m.MountPath+"/")
	}) {
		t.Errorf("--users %q is not on the mounted users Secret", args["--users"])
	}
	if len(pdbs) != 1 || pdbs[0].Spec.MaxUnavailable == nil {
		t.Errorf("cluster: %d disruption budgets, want one with maxUnavailable", len(pdbs))
	}
	monitors := find[*serviceMonitor](t, objs, "ServiceMonitor")
	if len(monitors) != 1 || monitors[0].Spec.Endpoints[0].Path != "/metrics" || monitors[0].Spec.JobLabel == "" {
		t.Errorf("service monitors %+v", monitors)
	}
	checkRules(t, find[*prometheusRule](t, objs, "PrometheusRule"))
}

// checkRules: the PrometheusRule is deploy/prometheus/rules.yaml, through
// the chart's copy of it.
func checkRules(t *testing.T, rules []*prometheusRule) {
	t.Helper()
	source, err := os.ReadFile("../prometheus/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile("rscoord/files/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(source, copied) {
		t.Error("deploy/helm/rscoord/files/rules.yaml differs from deploy/prometheus/rules.yaml: copy it again")
	}
	var want ruleFile
	if err := yaml.UnmarshalStrict(source, &want); err != nil {
		t.Fatal(err)
	}
	if len(rules) != 1 {
		t.Fatalf("%d PrometheusRules, want 1", len(rules))
	}
	got, _ := json.Marshal(rules[0].Spec)
	w, _ := json.Marshal(want)
	if !bytes.Equal(got, w) || len(want.Groups) == 0 {
		t.Errorf("the PrometheusRule's spec is not deploy/prometheus/rules.yaml:\n%s\nwant\n%s", got, w)
	}
}

// serveFlags are the long flags of the documented serve flag tables: the
// Server flags of docs/operations.md and the cluster flags of
// docs/cluster.md, both kept true to the parser by cmd/rscoord's tests.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	flags := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `--(\\[no-\\])?([a-z0-9-]+)`")
	for _, doc := range []string{"../../docs/operations.md", "../../docs/cluster.md"} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range row.FindAllStringSubmatch(string(raw), -1) {
			flags["--"+m[2]] = true
			n++
		}
		if n < 5 {
			t.Fatalf("%s lists %d serve flags; the table's pattern no longer matches", doc, n)
		}
	}
	return flags
}
