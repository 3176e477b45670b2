package report

import (
	"errors"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusWriteFailed(t *testing.T) {
	f := newFixture(t, nil)
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-autoscaler-status"}}
	f.r.StatusWriteFailed(cm, errors.New("conflict"))
	wantEvents(t, f.drain(), "Warning StatusWriteFailed Failed to update autoscaler status: conflict")
}
