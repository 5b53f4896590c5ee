package rans

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/k3-project/k3/checkpoint"
	"github.com/k3-project/k3/config"
	"github.com/k3-project/k3/safetensors"
)

// ErrOtherModel reports a coded checkpoint whose dense tensors or configuration are no longer
// those of the model its experts were coded from (§3.6): the manifest's "model" names another
// identity than the checkpoint's own. The real case is a source model updated in place after
// compress-experts linked its expert-free shards into the copy.
var ErrOtherModel = errors.New("rans: coded checkpoint of another model")

// identify returns the identity (§3.6) of the model in dir, opened as ck, or "" when dir has no
// config.json that configures a model: Repack codes any checkpoint's containers, and one that is
// not a model has no identity (k3.Open refuses such a configuration on its own).
func identify(dir string, ck *safetensors.Checkpoint) (string, error) {
	cfg, err := config.Load(filepath.Join(dir, "config.json"))
	if err != nil {
		return "", nil
	}
	id, _, err := checkpoint.Identify(ck, cfg)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// CheckModel refuses, with ErrOtherModel, a coded checkpoint in dir whose manifest names another
// model than id, the identity k3.Open computed for it. A directory without a manifest, or a
// manifest without "model" (written before identities), is not refused.
func CheckModel(dir string, id checkpoint.Identity) error {
	f, err := os.Open(filepath.Join(dir, ManifestFileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrManifest, err)
	}
	man, err := ParseManifest(f)
	f.Close()
	if err != nil {
		return err
	}
	return checkModel(man.Model, id.String())
}

func checkModel(coded, now string) error {
	switch {
	case coded == "" || coded == now:
		return nil
	case now == "":
		return fmt.Errorf("%w: experts coded from model %s, the checkpoint has no config.json to identify it", ErrOtherModel, coded)
	}
	return fmt.Errorf("%w: experts coded from model %s, the checkpoint is now model %s (compress-experts again from the source)", ErrOtherModel, coded, now)
}
