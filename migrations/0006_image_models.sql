-- Image models (issue 28): a release's modality (an image runtime's backbone, and the models trained
-- on it, read a still photo), and the asset an image training's example is read from.

ALTER TABLE model_releases ADD COLUMN modality text NOT NULL DEFAULT 'text' CHECK (modality IN ('text', 'image'));

ALTER TABLE training_examples ADD COLUMN asset_id uuid;

CREATE OR REPLACE FUNCTION model_release_immutable() RETURNS trigger AS $$
BEGIN
  IF NEW.id <> OLD.id OR NEW.fingerprint <> OLD.fingerprint
     OR NEW.base_release IS DISTINCT FROM OLD.base_release OR NEW.calibration IS DISTINCT FROM OLD.calibration
     OR NEW.task IS DISTINCT FROM OLD.task OR NEW.head IS DISTINCT FROM OLD.head
     OR NEW.training_id IS DISTINCT FROM OLD.training_id OR NEW.modality <> OLD.modality THEN
    RAISE EXCEPTION 'release % is immutable: id, fingerprint, base, calibration, task, head, training and modality cannot change', OLD.id
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE OR REPLACE VIEW model_registry AS
  SELECT r.id, r.fingerprint,
         coalesce(array_agg(a.alias ORDER BY a.alias) FILTER (WHERE a.alias IS NOT NULL), '{}') AS aliases,
         r.owners, r.url, r.token_env, r.release_date, r.description, r.retired_at, r.sidecar_url,
         coalesce(b.id, r.id) AS runtime_release, coalesce(b.fingerprint, r.fingerprint) AS runtime_fingerprint,
         r.calibration, r.calibration_report IS NOT NULL AS has_calibration_report, r.revision,
         r.task, r.head, r.training_id, coalesce(b.modality, r.modality) AS modality
    FROM model_releases r
    LEFT JOIN model_releases b ON b.id = r.base_release
    LEFT JOIN model_aliases a ON a.release_id = r.id
   GROUP BY r.id, b.id;
