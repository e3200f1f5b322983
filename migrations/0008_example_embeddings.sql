-- A training example's sentence embedding (the runtime's sentence encoder on its state, one more
-- input a trained head may read) and the fingerprint of the encoder that made it.

ALTER TABLE training_examples ADD COLUMN embedding real[], ADD COLUMN encoder text,
  ADD CONSTRAINT training_examples_embedding_encoder CHECK ((encoder IS NULL) = (embedding IS NULL));
