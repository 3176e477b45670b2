package shadow

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// considered are the contract's interfaces, each either implemented by the
// wrappers (forwarded to the real provider or group) or not needed here. A
// new interface in package cloudprovider fails this test until it is added:
// the core finds an optional interface by a type assertion, which a wrapper
// that lacks it would silently answer "no" to.
var considered = map[string]string{
	"CloudProvider":             "Provider",
	"NodeGroup":                 "group",
	"PricingModel":              "returned by the real provider as it is",
	"ProblemReporter":           "Provider",
	"DeletingInstancesReporter": "Provider",
	"DRAAware":                  "Provider",
	"SizedCreator":              "group",
	"HourlyCostLimiter":         "group",
	"InstanceQuotaReporter":     "Provider",
	"AvailabilityReporter":      "group",
	"MachineTypeOrderer":        "Provider",
	"ProvisionTimeoutLearner":   "group",
}

func TestEveryInterfaceOfTheContractIsConsidered(t *testing.T) {
	files, err := filepath.Glob("../*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, isInterface := ts.Type.(*ast.InterfaceType); isInterface && ts.Name.IsExported() {
					found = append(found, ts.Name.Name)
				}
			}
			return true
		})
	}
	sort.Strings(found)
	t.Logf("interfaces of package cloudprovider: %v", found)
	if len(found) == 0 {
		t.Fatal("no interface found in package cloudprovider")
	}
	for _, name := range found {
		if _, ok := considered[name]; !ok {
			t.Errorf("cloudprovider.%s is new: implement it in the shadow wrappers (forwarding to the real provider or group) if the core looks for it, and add it to considered", name)
		}
	}
}
