package reflex

import (
	"errors"
	"testing"

	"github.com/nerve-agents/nerve/adapter"
	"github.com/nerve-agents/nerve/config"
)

func TestMaskOutput(t *testing.T) {
	t.Setenv("NERVE_TEST_KEY", "sk-abc")
	t.Setenv("NERVE_TEST_LONGER", "sk-abc-def")
	t.Setenv("NERVE_TEST_SHORT", "ab")
	cfg := &config.Config{}
	cfg.Sandbox.Secrets = []config.Secret{{Env: "NERVE_TEST_KEY"}, {Env: "NERVE_TEST_LONGER", Host: "h"}, {Env: "NERVE_TEST_SHORT"}, {Env: "NERVE_TEST_UNSET"}}
	res, err := maskOutput(cfg, &adapter.Result{Content: "a sk-abc-def b sk-abc c ab"}, nil)
	if err != nil || res.Content != "a *** b *** c ab" {
		t.Errorf("content %q (%v): a secret holding another is masked whole, a short one not at all", res.Content, err)
	}
	ae := &adapter.Error{Adapter: "x", Reason: "said sk-abc", StderrTail: []string{"key=sk-abc-def"}, Err: adapter.ErrTimeout}
	_, err = maskOutput(cfg, nil, ae)
	if got := err.Error(); got != "adapter x: said *** (exit status 0); stderr: key=***" || !errors.Is(err, adapter.ErrTimeout) {
		t.Errorf("error %q; still a timeout: %v", got, errors.Is(err, adapter.ErrTimeout))
	}
	if ae.Reason != "said sk-abc" {
		t.Error("the adapter's error was changed in place")
	}
	if r := SecretMasker(&config.Config{}); r != nil {
		t.Error("a masker without secrets")
	}
}
