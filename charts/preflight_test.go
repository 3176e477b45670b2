package charts

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The helm test hook (templates/tests/preflight.yaml) runs the preflight
// check as the Deployment would run: same image, ServiceAccount, volumes and
// mounts, pod hardening, and the Deployment's flags after the word
// preflight, so that its lines are those of this install.
func TestChartPreflightTestMatchesDeployment(t *testing.T) {
	t.Parallel()
	for _, values := range []map[string]interface{}{
		nil,
		{
			"provisioningRequests": map[string]interface{}{"enabled": true},
			"capacityBuffers":      map[string]interface{}{"controllerEnabled": true, "podDryRunEnabled": false},
			"extraArgs":            map[string]interface{}{"expander": "price", "node-autoprovisioning-enabled": true},
			"extraVolumeSecrets":   map[string]interface{}{"extra-ca": map[string]interface{}{"mountPath": "/etc/extra-ca"}},
			"image":                map[string]interface{}{"pullSecrets": []interface{}{"registry-me"}},
			"cloudConfig":          map[string]interface{}{"autoprovisioning": map[string]interface{}{"sizes": []interface{}{"s-*"}}},
		},
	} {
		// helm template renders test hooks too (unless --skip-tests).
		out, err := helm(t, withClusterID(values), "template", "cluster-autoscaler", chartDir, "--namespace", "kube-system")
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		var pod *corev1.Pod
		var dep *appsv1.Deployment
		for _, doc := range docSeparator.Split(out, -1) {
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatal(err)
			}
			switch head.Kind {
			case "Pod":
				pod = &corev1.Pod{}
				if err := yaml.UnmarshalStrict([]byte(doc), pod); err != nil {
					t.Fatalf("preflight Pod: %v\n%s", err, doc)
				}
			case "Deployment":
				dep = &appsv1.Deployment{}
				if err := yaml.UnmarshalStrict([]byte(doc), dep); err != nil {
					t.Fatal(err)
				}
			}
		}
		if pod == nil || dep == nil {
			t.Fatalf("values %v: rendered no test Pod (%v) or no Deployment (%v)", values, pod != nil, dep != nil)
		}
		if pod.Annotations["helm.sh/hook"] != "test" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("the preflight Pod is not a helm test hook that runs once: annotations %v, restartPolicy %q", pod.Annotations, pod.Spec.RestartPolicy)
		}
		ds, ps := dep.Spec.Template.Spec, pod.Spec
		if ps.ServiceAccountName != ds.ServiceAccountName || !reflect.DeepEqual(ps.Volumes, ds.Volumes) ||
			!reflect.DeepEqual(ps.SecurityContext, ds.SecurityContext) || !reflect.DeepEqual(ps.ImagePullSecrets, ds.ImagePullSecrets) {
			t.Errorf("values %v: the preflight Pod's service account, volumes, security context or pull secrets differ from the Deployment's", values)
		}
		pc, dc := ps.Containers[0], ds.Containers[0]
		if pc.Image != dc.Image || !reflect.DeepEqual(pc.VolumeMounts, dc.VolumeMounts) || !reflect.DeepEqual(pc.SecurityContext, dc.SecurityContext) {
			t.Errorf("values %v: the preflight container's image, mounts or security context differ from the Deployment's", values)
		}
		if len(pc.Args) == 0 || pc.Args[0] != "preflight" {
			t.Fatalf("preflight args %v: want the subcommand first", pc.Args)
		}
		// The Deployment's flags, but the metrics one (the check serves no metrics).
		var want []string
		for _, a := range dc.Args {
			if !strings.HasPrefix(a, "--emit-per-nodegroup-metrics") {
				want = append(want, a)
			}
		}
		if got := pc.Args[1:]; !slices.Equal(got, want) {
			t.Errorf("values %v: preflight flags\n%v\nthe Deployment's\n%v", values, got, want)
		}
	}
}
