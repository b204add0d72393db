/**
 * Which workflows someone follows, on any replica (docs/spec.md §14), as this replica has
 * heard it: each replica announces its followers of each workflow every few seconds (its own
 * announcements are noted here too), and an announcement holds for a TTL. While a workflow is
 * followed here, a run of it on this replica reports to its log; once no announcement holds,
 * it reports to nobody. The TTL is also how long a follower that went (a dropped connection,
 * a drained replica) can come back and find every event since it left.
 */

interface Held {
  followers: number;
  until: number;
}

export class Interest {
  private readonly byWorkflow = new Map<string, Map<string, Held>>();

  /** Whether anyone follows `workflowId`. */
  has(workflowId: string): boolean {
    return this.byWorkflow.has(workflowId);
  }

  /** Followers of `workflowId` on every replica, as last announced. */
  followers(workflowId: string): number {
    let sum = 0;
    for (const held of this.byWorkflow.get(workflowId)?.values() ?? []) sum += held.followers;
    return sum;
  }

  /** Workflows followed. */
  get size(): number {
    return this.byWorkflow.size;
  }

  /** `replica` has these followers, until `until`; returns the workflows that nobody followed before. */
  note(replica: string, workflows: ReadonlyArray<readonly [string, number]>, until: number): string[] {
    const gained: string[] = [];
    for (const [workflowId, followers] of workflows) {
      let replicas = this.byWorkflow.get(workflowId);
      if (!replicas) {
        this.byWorkflow.set(workflowId, (replicas = new Map()));
        gained.push(workflowId);
      }
      replicas.set(replica, { followers, until });
    }
    return gained;
  }

  /** Drops what no announcement holds any more at `now`; returns the workflows nobody follows now. */
  expire(now: number): string[] {
    const lost: string[] = [];
    for (const [workflowId, replicas] of this.byWorkflow) {
      for (const [replica, held] of replicas) if (held.until <= now) replicas.delete(replica);
      if (replicas.size === 0) {
        this.byWorkflow.delete(workflowId);
        lost.push(workflowId);
      }
    }
    return lost;
  }
}
