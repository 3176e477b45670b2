package report

import (
	"errors"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPriorityConfigMapInvalid(t *testing.T) {
	f := newFixture(t, nil)
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-priority-expander"}}
	f.r.PriorityConfigMapInvalid(cm, errors.New(`key "priorities" missing`))
	wantEvents(t, f.drain(), `Warning PriorityConfigMapInvalid priority expander ignores this ConfigMap: key "priorities" missing`)
}
