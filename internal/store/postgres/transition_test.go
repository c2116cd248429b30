package postgres_test

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

func TestTransitionConformance(t *testing.T) {
	url := testURL(t)
	storetest.RunTransition(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: freshSchema(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
