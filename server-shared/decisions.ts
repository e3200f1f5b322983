/**
 * What a decision request must satisfy beyond its schema, checked the same way for a real-time
 * request (edge) and a bulk record (sidecar's bulk worker), so both answer with the same 422.
 */
import { budgetViolation } from "../contract/budget.ts";
import type { DecisionRequest } from "../contract/decision.ts";
import { ServiceError } from "./errors.ts";

/** The 422 a valid-shaped request still earns (images, the request token bound), or null. */
export function decisionViolation(request: DecisionRequest): ServiceError | null {
  if (request.images !== undefined) return new ServiceError("invalid_request", "images: image decisions are not enabled on this service");
  const violation = budgetViolation(request);
  return violation ? new ServiceError("invalid_request", violation) : null;
}
