package postgres_test

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

func TestTerminalConformance(t *testing.T) {
	url := testURL(t)
	storetest.RunTerminal(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: freshSchema(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestWatchConformance(t *testing.T) {
	url := testURL(t)
	storetest.RunWatches(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: freshSchema(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestWorkLeaseConformance(t *testing.T) {
	url := testURL(t)
	storetest.RunWorkLeases(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: freshSchema(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
