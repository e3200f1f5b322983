"""One module per resource of the service: `client.models`, `client.batches`, `client.trainings`."""
