package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/airlockhq/airlock/internal/testkit"
)

// k8s is one Kubernetes object, read as plain YAML: the test needs no
// Kubernetes client types, only the fields it checks.
type k8s map[string]any

// get walks a dotted path of maps; a number picks a list's element.
func (o k8s) get(path string) any {
	var v any = map[string]any(o)
	for key := range strings.SplitSeq(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func (o k8s) str(path string) string {
	s, _ := o.get(path).(string)
	return s
}

// TestKubernetesManifests reads deploy/kubernetes/airlock.yaml and checks
// what makes it several replicas on PostgreSQL done right: two or more
// replicas; readiness on /readyz and liveness on /healthz at the port the
// image listens on; the database URL and the shared admin token from a
// Secret; a PodDisruptionBudget and a Service that select the pods. Then
// it starts a real server on PostgreSQL with the manifest's environment
// and asks it each probe's path: both must answer 200.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	dec := yaml.NewDecoder(strings.NewReader(readFile(t, "kubernetes/airlock.yaml")))
	objects := map[string]k8s{}
	for {
		// Into a plain map: decoded into k8s, nested maps would be k8s too.
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("airlock.yaml: %v", err)
		}
		o := k8s(raw)
		kind := o.str("kind")
		if _, dup := objects[kind]; dup {
			t.Fatalf("two objects of kind %s", kind)
		}
		objects[kind] = o
	}
	dep, svc, pdb := objects["Deployment"], objects["Service"], objects["PodDisruptionBudget"]
	if dep == nil || svc == nil || pdb == nil {
		t.Fatalf("want a Deployment, a Service and a PodDisruptionBudget; got %v", slices.Sorted(func(yield func(string) bool) {
			for k := range objects {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if r, _ := dep.get("spec.replicas").(int); r < 2 {
		t.Errorf("replicas %v, want at least 2", dep.get("spec.replicas"))
	}
	labels, _ := dep.get("spec.template.metadata.labels").(map[string]any)
	selects := func(what string, sel any) {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range m {
			if labels[k] != v {
				t.Errorf("%s selects %s=%v, which the pods do not carry (%v)", what, k, v, labels)
			}
		}
	}
	selects("the Deployment", dep.get("spec.selector.matchLabels"))
	selects("the PodDisruptionBudget", pdb.get("spec.selector.matchLabels"))
	selects("the Service", svc.get("spec.selector"))
	if minAvail, _ := pdb.get("spec.minAvailable").(int); minAvail < 1 || minAvail >= dep.get("spec.replicas").(int) {
		t.Errorf("PodDisruptionBudget minAvailable %v: want at least 1 and fewer than the replicas, so a drain can proceed", pdb.get("spec.minAvailable"))
	}

	containers, _ := dep.get("spec.template.spec.containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c := k8s(containers[0].(map[string]any))
	if c.str("ports.0.containerPort") != "" || fmt.Sprint(c.get("ports.0.containerPort")) != listenPort {
		t.Errorf("containerPort %v, want %s (the image's)", c.get("ports.0.containerPort"), listenPort)
	}
	portName := c.str("ports.0.name")
	if svc.str("spec.ports.0.targetPort") != portName {
		t.Errorf("the Service targets port %v, not the container's %q", svc.get("spec.ports.0.targetPort"), portName)
	}
	if uid, _ := dep.get("spec.template.spec.securityContext.runAsUser").(int); uid != imageUID || dep.get("spec.template.spec.securityContext.runAsNonRoot") != true {
		t.Errorf("pods run as %v (runAsNonRoot %v), want %d, non-root", uid, dep.get("spec.template.spec.securityContext.runAsNonRoot"), imageUID)
	}

	// The environment, with each Secret reference filled as the Secret
	// would: the database URL of a schema of the test's own, and a token.
	admin := "k8s-test-admin-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secrets := map[string]string{"database-url": testkit.SchemaURL(t, testkit.CreateSchema(t, "k8s_")), "admin-token": admin}
	// The image's environment first, as the container runtime gives it,
	// then the manifest's over it.
	env := imageEnv(t)
	envs, _ := c.get("env").([]any)
	fromSecret := map[string]bool{}
	for _, e := range envs {
		e := k8s(e.(map[string]any))
		name, value := e.str("name"), e.str("value")
		if ref := e.str("valueFrom.secretKeyRef.key"); ref != "" {
			v, ok := secrets[ref]
			if !ok {
				t.Fatalf("%s reads Secret key %q, which the manifest's instructions do not create", name, ref)
			}
			value, fromSecret[name] = v, true
		}
		if name == "AIRLOCK_ADDR" {
			if !strings.HasSuffix(value, ":"+listenPort) {
				t.Errorf("AIRLOCK_ADDR %q is not the container port %s", value, listenPort)
			}
			value = "127.0.0.1:0"
		}
		env = append(env, name+"="+value)
	}
	for _, name := range []string{"AIRLOCK_DB", "AIRLOCK_ADMIN_TOKEN"} {
		if !fromSecret[name] {
			t.Errorf("%s does not come from a Secret", name)
		}
	}

	probes := map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"}
	srv := testkit.Serve(t, testkit.Airlock(t, false), t.TempDir(), env, "serve")
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	for probe, want := range probes {
		path := c.str(probe + ".httpGet.path")
		if path != want {
			t.Errorf("%s asks %q, want %s", probe, path, want)
		}
		if port := c.str(probe + ".httpGet.port"); port != portName {
			t.Errorf("%s asks port %v, not the container's %q", probe, c.get(probe+".httpGet.port"), portName)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		r, err := testkit.Call(ctx, hc, "GET", srv.URL+path, "", "")
		cancel()
		if err != nil || r.Status != http.StatusOK {
			t.Errorf("%s: GET %s on a real server on PostgreSQL: %v %d %s", probe, path, err, r.Status, r.Raw)
		}
	}
	// The server took the Secret's admin token.
	lifecycle(t, srv.URL, admin)
}

// imageEnv returns the environment ../Containerfile's ENV instructions
// give the image, as KEY=value.
func imageEnv(t *testing.T) []string {
	t.Helper()
	text := strings.ReplaceAll(readFile(t, "../Containerfile"), "\\\n", " ")
	var env []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "ENV" {
			continue
		}
		for _, kv := range f[1:] {
			if !strings.Contains(kv, "=") {
				t.Fatalf("ENV %q: write ENV KEY=value", kv)
			}
			env = append(env, kv)
		}
	}
	if len(env) == 0 {
		t.Fatal("the Containerfile sets no environment")
	}
	return env
}
