package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/shadow"
	cptest "github.com/doks-autoscaler/cluster-autoscaler/cloudprovider/test"
	"github.com/doks-autoscaler/cluster-autoscaler/config"
	"github.com/doks-autoscaler/cluster-autoscaler/internal/shadowkube"
)

// With --shadow, the main client's writes are dry runs, while the events and
// status clients, built from a copy of its config made before the dry-run
// wrapper, write for real (the status ConfigMap marked); without it nothing
// is wrapped.
func TestShadowWrapsOnlyTheMainClientsWrites(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("shadow=%v", on), func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			var bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/version" {
					fmt.Fprint(w, `{"major":"1","minor":"35","gitVersion":"v1.35.0"}`)
					return
				}
				body := make([]byte, 1<<16)
				n, _ := r.Body.Read(body)
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
				bodies = append(bodies, string(body[:n]))
				mu.Unlock()
				fmt.Fprint(w, "{}")
			}))
			defer srv.Close()
			opts := config.Defaults()
			opts.KubernetesURL = srv.URL
			opts.KubeAPIContentType = "application/json"
			opts.Namespace = "kube-system"
			opts.Shadow = on
			c, err := newKubeClients(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := c.kube.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, []byte(`{}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.events.CoreV1().Events("kube-system").Create(ctx, &apiv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: opts.StatusConfigMapName},
				Data: map[string]string{"status": "autoscalerStatus: Running\n"}}
			if _, err := c.status.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			dry := "?"
			if on {
				dry = "?dryRun=All"
			}
			want := []string{
				"PATCH /api/v1/nodes/n1" + dry,
				"POST /api/v1/namespaces/kube-system/events?",
				"PUT /api/v1/namespaces/kube-system/configmaps/" + opts.StatusConfigMapName + "?",
			}
			if strings.Join(seen, "\n") != strings.Join(want, "\n") {
				t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
			}
			if marked := strings.Contains(bodies[2], shadowkube.Annotation); marked != on {
				t.Errorf("status ConfigMap marked %v, want %v: %s", marked, on, bodies[2])
			}
		})
	}
}

func TestShadowProviderOnlyWithTheFlag(t *testing.T) {
	real := cptest.NewProvider()
	opts := config.Defaults()
	if p := shadowProvider(opts, real); p != real {
		t.Errorf("without --shadow the provider is wrapped: %T", p)
	}
	opts.Shadow = true
	if p, ok := shadowProvider(opts, real).(*shadow.Provider); !ok || p.Inner() != real {
		t.Errorf("with --shadow the provider is %T", p)
	}
}
