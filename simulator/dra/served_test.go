package dra

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A cluster without resource.k8s.io/v1 (Kubernetes before 1.34, or the
// group turned off) runs the autoscaler without DRA and says why; a
// discovery failure is not taken for "no DRA".
func TestDRAServed(t *testing.T) {
	resources := func(names ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1"}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
		}
		return l
	}
	all := resources("resourceslices", "deviceclasses", "resourceclaims", "resourceclaims/status", "resourceclaimtemplates")
	beta := &metav1.APIResourceList{GroupVersion: "resource.k8s.io/v1beta1", APIResources: all.APIResources}
	for _, tc := range []struct {
		name      string
		lists     []*metav1.APIResourceList
		failure   error
		want      bool
		wantWhy   string
		wantError bool
	}{
		{name: "v1 with every resource", lists: []*metav1.APIResourceList{all}, want: true},
		{name: "no resource.k8s.io at all", wantWhy: "does not serve resource.k8s.io/v1"},
		{name: "only v1beta1 (Kubernetes 1.32, 1.33)", lists: []*metav1.APIResourceList{beta}, wantWhy: "does not serve resource.k8s.io/v1"},
		{name: "v1 without claim templates", lists: []*metav1.APIResourceList{resources("resourceslices", "deviceclasses", "resourceclaims")}, wantWhy: "without [resourceclaimtemplates]"},
		{name: "discovery fails", lists: []*metav1.APIResourceList{all}, failure: errors.New("connection refused"), wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.lists}}
			if tc.failure != nil {
				d.PrependReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.failure })
			}
			ok, why, err := Served(d)
			if (err != nil) != tc.wantError {
				t.Fatalf("err = %v, want error %v", err, tc.wantError)
			}
			if ok != tc.want || !strings.Contains(why, tc.wantWhy) {
				t.Errorf("Served = %v, %q; want %v, a reason containing %q", ok, why, tc.want, tc.wantWhy)
			}
		})
	}
}
