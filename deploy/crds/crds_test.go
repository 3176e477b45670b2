package crds

import (
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The generated CRDs serve the versions upstream 1.36.1's do, store the
// one the autoscaler reads, and keep the validation users and Kueue meet
// (a marker lost from apis/ would drop it silently).
func TestServedVersionsAndValidation(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, c := range all {
		byName[c.Name] = c
	}
	cases := []struct {
		crd, storage, deprecated string
		shortNames               string
		checks                   map[string]func(props map[string]apiextensionsv1.JSONSchemaProps) string
	}{
		{
			crd: "provisioningrequests.autoscaling.x-k8s.io", storage: "v1", deprecated: "v1beta1", shortNames: "provreq,provreqs",
			checks: map[string]func(map[string]apiextensionsv1.JSONSchemaProps) string{
				"podSets 1..32, immutable": func(p map[string]apiextensionsv1.JSONSchemaProps) string {
					s := p["spec"].Properties["podSets"]
					return fmt.Sprintf("%d %d %s %v", *s.MinItems, *s.MaxItems, s.XValidations[0].Rule, s.Items.Schema.Properties["count"].Minimum != nil)
				},
				"class name immutable, ≤253": func(p map[string]apiextensionsv1.JSONSchemaProps) string {
					s := p["spec"].Properties["provisioningClassName"]
					return fmt.Sprintf("%d %s", *s.MaxLength, s.XValidations[0].Rule)
				},
				"required": func(p map[string]apiextensionsv1.JSONSchemaProps) string {
					return strings.Join(p["spec"].Required, ",")
				},
			},
		},
		{
			crd: "capacitybuffers.autoscaling.x-k8s.io", storage: "v1beta1", deprecated: "v1alpha1", shortNames: "cb",
			checks: map[string]func(map[string]apiextensionsv1.JSONSchemaProps) string{
				"spec rules": func(p map[string]apiextensionsv1.JSONSchemaProps) string {
					var rules []string
					for _, v := range p["spec"].XValidations {
						rules = append(rules, v.Rule)
					}
					return strings.Join(rules, " ; ")
				},
				"strategy default": func(p map[string]apiextensionsv1.JSONSchemaProps) string {
					return string(p["spec"].Properties["provisioningStrategy"].Default.Raw)
				},
			},
		},
	}
	want := map[string]string{
		"podSets 1..32, immutable":   "1 32 self == oldSelf true",
		"class name immutable, ≤253": "253 self == oldSelf",
		"required":                   "podSets,provisioningClassName",
		"spec rules":                 "!has(self.podTemplateRef) || has(self.replicas) || has(self.limits) ; !(has(self.podTemplateRef) && has(self.scalableRef))",
		"strategy default":           `"buffer.x-k8s.io/active-capacity"`,
	}
	for _, tc := range cases {
		c := byName[tc.crd]
		if c == nil {
			t.Errorf("%s: not in deploy/crds", tc.crd)
			continue
		}
		if got := strings.Join(c.Spec.Names.ShortNames, ","); got != tc.shortNames {
			t.Errorf("%s: short names %q, want %q", tc.crd, got, tc.shortNames)
		}
		if len(c.Spec.Versions) != 2 {
			t.Errorf("%s: %d versions, want 2", tc.crd, len(c.Spec.Versions))
		}
		for _, v := range c.Spec.Versions {
			if !v.Served || v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("%s %s: served %v, status subresource %v", tc.crd, v.Name, v.Served, v.Subresources)
			}
			switch v.Name {
			case tc.storage:
				if !v.Storage || v.Deprecated {
					t.Errorf("%s %s: storage %v, deprecated %v; want the stored, current version", tc.crd, v.Name, v.Storage, v.Deprecated)
				}
			case tc.deprecated:
				if v.Storage || !v.Deprecated {
					t.Errorf("%s %s: storage %v, deprecated %v; want served, deprecated, not stored", tc.crd, v.Name, v.Storage, v.Deprecated)
				}
			default:
				t.Errorf("%s: unexpected version %s", tc.crd, v.Name)
			}
			props := v.Schema.OpenAPIV3Schema.Properties
			for name, check := range tc.checks {
				if got := check(props); got != want[name] {
					t.Errorf("%s %s: %s = %q, want %q", tc.crd, v.Name, name, got, want[name])
				}
			}
		}
	}
}
