// Command oracle answers scheduling questions with kube-scheduler's own
// code, for Muster's differential test (tests/oracle.rs).
//
// It reads one case (a JSON object) or a batch of cases (a JSON array) on
// stdin and writes one answer per case (an object, or an array in the same
// order) on stdout. A case holds real Kubernetes objects: nodes, the pods
// already bound to them, the pod to place, and for Dynamic Resource
// Allocation the ResourceSlices, DeviceClasses and ResourceClaims (claims
// with status.allocation hold their devices; the others are the pod's to
// allocate), and CEL selector expressions.
//
// The answer gives, per node, every Filter plugin's verdict (status code
// and reasons) after PreFilter, and for the nodes passing every Filter each
// Score plugin's normalised score and the weighted total, as the in-tree
// plugins of the pinned kube-scheduler compute them through a framework
// built over a snapshot of the case; the structured allocator's answer on
// each node for the unallocated claims; and each selector's compile verdict
// (in the scheduler's stored-expressions environment and in the stricter
// one the API server checks new objects with) and value per device.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/cel/environment"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/klog/v2"
)

// The plugins of kube-scheduler's default profile that place an ordinary
// pod on nodes without volumes or devices; DynamicResources is answered by
// the allocator itself (Allocation), the volume plugins are not asked.
var placementPlugins = []string{
	"PrioritySort", "DefaultBinder",
	"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
	"NodeResourcesFit", "InterPodAffinity", "PodTopologySpread",
	"NodeResourcesBalancedAllocation", "ImageLocality",
}

// Case is one question.
type Case struct {
	ID             string                       `json:"id,omitempty"`
	Nodes          []*v1.Node                   `json:"nodes,omitempty"`
	Pods           []*v1.Pod                    `json:"pods,omitempty"`
	Pod            *v1.Pod                      `json:"pod,omitempty"`
	ResourceSlices []*resourceapi.ResourceSlice `json:"resourceSlices,omitempty"`
	DeviceClasses  []*resourceapi.DeviceClass   `json:"deviceClasses,omitempty"`
	ResourceClaims []*resourceapi.ResourceClaim `json:"resourceClaims,omitempty"`
	Selectors      []string                     `json:"selectors,omitempty"`
}

// Status is a plugin's verdict.
type Status struct {
	Code    string   `json:"code"`
	Reasons []string `json:"reasons,omitempty"`
	// Nodes a PreFilter result narrowed the nodes to (PreFilter only).
	Nodes []string `json:"nodes,omitempty"`
}

// NodeAnswer is what the plugins said of one node.
type NodeAnswer struct {
	Name     string            `json:"name"`
	Filters  map[string]Status `json:"filters"`
	Feasible bool              `json:"feasible"`
	// Normalised scores (before weights), of the nodes passing Filter.
	Scores map[string]int64 `json:"scores,omitempty"`
	Total  int64            `json:"total"`
}

// Allocation is the structured allocator's answer on one node.
type Allocation struct {
	Node string `json:"node"`
	Fits bool   `json:"fits"`
	// An error that fails only this node (ErrFailedAllocationOnNode).
	NodeError string `json:"nodeError,omitempty"`
	// An error that aborts the scheduling attempt.
	Error   string                         `json:"error,omitempty"`
	Results []resourceapi.AllocationResult `json:"results,omitempty"`
}

// DeviceValue is one selector's value for one device.
type DeviceValue struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	Value  *bool  `json:"value,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Selector is one CEL expression's verdicts.
type Selector struct {
	Expression string `json:"expression"`
	// The compile error in the scheduler's environment (stored expressions).
	CompileError string `json:"compileError,omitempty"`
	// The compile error in the environment for new objects (admission).
	CompileErrorNew string        `json:"compileErrorNew,omitempty"`
	Values          []DeviceValue `json:"values,omitempty"`
}

// Answer is one case's answer.
type Answer struct {
	ID         string            `json:"id,omitempty"`
	Error      string            `json:"error,omitempty"`
	PreFilter  map[string]Status `json:"preFilter,omitempty"`
	Nodes      []NodeAnswer      `json:"nodes,omitempty"`
	BestNodes  []string          `json:"bestNodes,omitempty"`
	Allocation []Allocation      `json:"allocation,omitempty"`
	Selectors  []Selector        `json:"selectors,omitempty"`
}

func main() {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	in, err := io.ReadAll(bufio.NewReader(os.Stdin))
	if err != nil {
		fail(err)
	}
	in = bytes.TrimSpace(in)
	env, err := newEnv()
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	if len(in) > 0 && in[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(in, &raws); err != nil {
			fail(err)
		}
		answers := make([]Answer, len(raws))
		for i, raw := range raws {
			answers[i] = env.answerRaw(raw)
		}
		if err := out.Encode(answers); err != nil {
			fail(err)
		}
		return
	}
	if err := out.Encode(env.answerRaw(in)); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
	os.Exit(1)
}

// env is what every case shares: the profile, the registry, the features.
type env struct {
	profile  *config.KubeSchedulerProfile
	registry frameworkruntime.Registry
	features plfeature.Features
	weights  map[string]int32
	args     map[string]runtime.Object
}

func newEnv() (*env, error) {
	// The framework records its metrics in the scheduler's registry.
	metrics.Register()
	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	defaults := cfg.Profiles[0]
	e := &env{
		registry: plugins.NewInTreeRegistry(),
		features: plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate),
		weights:  map[string]int32{},
		args:     map[string]runtime.Object{},
	}
	for _, p := range defaults.Plugins.MultiPoint.Enabled {
		e.weights[p.Name] = p.Weight
	}
	for _, pc := range defaults.PluginConfig {
		e.args[pc.Name] = pc.Args
	}
	profile := &config.KubeSchedulerProfile{
		SchedulerName: defaults.SchedulerName,
		Plugins:       &config.Plugins{},
	}
	for _, name := range placementPlugins {
		profile.Plugins.MultiPoint.Enabled = append(profile.Plugins.MultiPoint.Enabled,
			config.Plugin{Name: name, Weight: e.weights[name]})
		if a, ok := e.args[name]; ok {
			profile.PluginConfig = append(profile.PluginConfig, config.PluginConfig{Name: name, Args: a})
		}
	}
	e.profile = profile
	return e, nil
}

func (e *env) answerRaw(raw []byte) (a Answer) {
	defer func() {
		if r := recover(); r != nil {
			if os.Getenv("ORACLE_PANIC") != "" {
				panic(r)
			}
			a.Error = fmt.Sprintf("panic: %v", r)
		}
	}()
	var c Case
	if err := json.Unmarshal(raw, &c); err != nil {
		return Answer{Error: "decode: " + err.Error()}
	}
	a = e.answer(&c)
	a.ID = c.ID
	return a
}

// setDefaults applies the API server's defaults to every object, as the
// scheduler would see them.
func setDefaults(c *Case) {
	for _, n := range c.Nodes {
		legacyscheme.Scheme.Default(n)
	}
	for _, p := range c.Pods {
		legacyscheme.Scheme.Default(p)
	}
	if c.Pod != nil {
		legacyscheme.Scheme.Default(c.Pod)
	}
	for _, s := range c.ResourceSlices {
		legacyscheme.Scheme.Default(s)
	}
	for _, d := range c.DeviceClasses {
		legacyscheme.Scheme.Default(d)
	}
	for _, rc := range c.ResourceClaims {
		legacyscheme.Scheme.Default(rc)
	}
}

func (e *env) answer(c *Case) Answer {
	setDefaults(c)
	ctx := context.Background()
	var a Answer
	if c.Pod != nil && len(c.Nodes) > 0 {
		if err := e.place(ctx, c, &a); err != nil {
			a.Error = err.Error()
		}
	}
	if len(c.ResourceClaims) > 0 {
		if err := e.allocate(ctx, c, &a); err != nil {
			a.Error = err.Error()
		}
	}
	a.Selectors = e.selectors(ctx, c)
	return a
}

func status(s *fwk.Status) Status {
	if s == nil {
		return Status{Code: fwk.Success.String()}
	}
	return Status{Code: s.Code().String(), Reasons: s.Reasons()}
}

// place runs PreFilter, every Filter on every node, then PreScore, Score
// and NormalizeScore on the nodes passing them all.
func (e *env) place(ctx context.Context, c *Case, a *Answer) error {
	snapshot := cache.NewSnapshot(c.Pods, c.Nodes)
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	fh, err := frameworkruntime.NewFramework(ctx, e.registry, e.profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
	)
	if err != nil {
		return fmt.Errorf("framework: %w", err)
	}
	listed := fh.ListPlugins()
	instance := map[string]fwk.Plugin{}
	for _, name := range placementPlugins {
		factoryFn, ok := e.registry[name]
		if !ok {
			return fmt.Errorf("no plugin %s", name)
		}
		p, err := factoryFn(ctx, e.args[name], fh)
		if err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
		instance[name] = p
	}
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		return err
	}
	pod := c.Pod
	state := framework.NewCycleState()
	a.PreFilter = map[string]Status{}
	skipped := sets.New[string]()
	var allowed sets.Set[string]
	rejected := false
	for _, pc := range listed.PreFilter.Enabled {
		pl := instance[pc.Name].(fwk.PreFilterPlugin)
		res, s := pl.PreFilter(ctx, state, pod, nodeInfos)
		st := status(s)
		if s.IsSkip() {
			skipped.Insert(pc.Name)
		} else if !s.IsSuccess() {
			rejected = true
		}
		if res != nil && !res.AllNodes() {
			st.Nodes = sets.List(res.NodeNames)
			if allowed == nil {
				allowed = res.NodeNames.Clone()
			} else {
				allowed = allowed.Intersection(res.NodeNames)
			}
		}
		a.PreFilter[pc.Name] = st
	}
	var feasible []fwk.NodeInfo
	for _, ni := range nodeInfos {
		name := ni.Node().Name
		na := NodeAnswer{Name: name, Filters: map[string]Status{}}
		ok := !rejected && (allowed == nil || allowed.Has(name))
		if !rejected {
			for _, fc := range listed.Filter.Enabled {
				if skipped.Has(fc.Name) {
					na.Filters[fc.Name] = Status{Code: fwk.Skip.String()}
					continue
				}
				pl := instance[fc.Name].(fwk.FilterPlugin)
				s := pl.Filter(ctx, state, pod, ni)
				na.Filters[fc.Name] = status(s)
				if !s.IsSuccess() {
					ok = false
				}
			}
		}
		na.Feasible = ok
		if ok {
			feasible = append(feasible, ni)
		}
		a.Nodes = append(a.Nodes, na)
	}
	if len(feasible) == 0 {
		return nil
	}
	byName := map[string]*NodeAnswer{}
	for i := range a.Nodes {
		byName[a.Nodes[i].Name] = &a.Nodes[i]
		if a.Nodes[i].Feasible {
			a.Nodes[i].Scores = map[string]int64{}
		}
	}
	for _, sc := range listed.Score.Enabled {
		if pre, ok := instance[sc.Name].(fwk.PreScorePlugin); ok {
			s := pre.PreScore(ctx, state, pod, feasible)
			if s.IsSkip() {
				continue
			}
			if !s.IsSuccess() {
				return fmt.Errorf("PreScore %s: %v", sc.Name, s.AsError())
			}
		}
		pl := instance[sc.Name].(fwk.ScorePlugin)
		scores := make(fwk.NodeScoreList, len(feasible))
		for i, ni := range feasible {
			v, s := pl.Score(ctx, state, pod, ni)
			if !s.IsSuccess() {
				return fmt.Errorf("Score %s on %s: %v", sc.Name, ni.Node().Name, s.AsError())
			}
			scores[i] = fwk.NodeScore{Name: ni.Node().Name, Score: v}
		}
		if ext := pl.ScoreExtensions(); ext != nil {
			if s := ext.NormalizeScore(ctx, state, pod, scores); !s.IsSuccess() {
				return fmt.Errorf("NormalizeScore %s: %v", sc.Name, s.AsError())
			}
		}
		for _, ns := range scores {
			na := byName[ns.Name]
			na.Scores[sc.Name] = ns.Score
			na.Total += ns.Score * int64(sc.Weight)
		}
	}
	var best int64 = -1
	for _, ni := range feasible {
		t := byName[ni.Node().Name].Total
		if t > best {
			best = t
			a.BestNodes = nil
		}
		if t == best {
			a.BestNodes = append(a.BestNodes, ni.Node().Name)
		}
	}
	sort.Strings(a.BestNodes)
	return nil
}

// classLister serves the case's DeviceClasses to the allocator.
type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// allocate asks the structured allocator, with the features kube-scheduler
// enables by default, for the unallocated claims on every node.
func (e *env) allocate(ctx context.Context, c *Case, a *Answer) error {
	features := dynamicresources.AllocatorFeatures(e.features)
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	var claims []*resourceapi.ResourceClaim
	for _, rc := range c.ResourceClaims {
		if rc.Status.Allocation == nil {
			claims = append(claims, rc)
			continue
		}
		for _, r := range rc.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if features.ConsumableCapacity && r.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
				if r.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	if len(claims) == 0 {
		return nil
	}
	celCache := cel.NewCache(10, cel.Features{
		EnableConsumableCapacity: e.features.EnableDRAConsumableCapacity,
		EnableListTypeAttributes: e.features.EnableDRAListTypeAttributes,
	})
	allocator, err := structured.NewAllocator(ctx, features, state, classLister(c.DeviceClasses), c.ResourceSlices, celCache)
	if err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	for _, n := range c.Nodes {
		al := Allocation{Node: n.Name}
		res, err := allocator.Allocate(ctx, n, claims)
		switch {
		case errors.Is(err, structured.ErrFailedAllocationOnNode):
			al.NodeError = err.Error()
		case err != nil:
			al.Error = err.Error()
		case res != nil:
			al.Fits = true
			al.Results = res
		}
		a.Allocation = append(a.Allocation, al)
	}
	return nil
}

// selectors compiles each expression and evaluates it on every device of
// the case's slices.
func (e *env) selectors(ctx context.Context, c *Case) []Selector {
	if len(c.Selectors) == 0 {
		return nil
	}
	compiler := cel.GetCompiler(cel.Features{
		EnableConsumableCapacity: e.features.EnableDRAConsumableCapacity,
		EnableListTypeAttributes: e.features.EnableDRAListTypeAttributes,
	})
	newExpressions := environment.NewExpressions
	var out []Selector
	for _, expr := range c.Selectors {
		s := Selector{Expression: expr}
		if r := compiler.CompileCELExpression(expr, cel.Options{EnvType: &newExpressions}); r.Error != nil {
			s.CompileErrorNew = r.Error.Error()
		}
		r := compiler.CompileCELExpression(expr, cel.Options{})
		if r.Error != nil {
			s.CompileError = r.Error.Error()
			out = append(out, s)
			continue
		}
		for _, sl := range c.ResourceSlices {
			for _, d := range sl.Spec.Devices {
				v := DeviceValue{Driver: sl.Spec.Driver, Pool: sl.Spec.Pool.Name, Device: d.Name}
				ok, _, err := r.DeviceMatches(ctx, cel.Device{
					Driver:                   sl.Spec.Driver,
					AllowMultipleAllocations: d.AllowMultipleAllocations,
					Attributes:               d.Attributes,
					Capacity:                 d.Capacity,
				})
				if err != nil {
					v.Error = err.Error()
				} else {
					v.Value = &ok
				}
				s.Values = append(s.Values, v)
			}
		}
		out = append(out, s)
	}
	return out
}
