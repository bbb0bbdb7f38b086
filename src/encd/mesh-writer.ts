// The mesh writer: a TopSP's mesh program (its event tape, its DMA legs and semaphores) as the mesh
// and RDH composers write it.
import { EncAlgMeshType } from "../ir/enums.ts";
import { InternalError } from "../ir/errors.ts";
import { NO_LEG, type DmaLeg, type MeshEvent } from "./mesh-event.ts";
import { EncdChannel } from "./channel-writer.ts";

/** Where a rank's mesh program lives. */
export interface MeshPlacement {
  readonly device: number;
  readonly topsp: number;
  readonly engines: readonly number[];
  readonly queue: number;
  /** The completion semaphore every engine increments at the end of an op. */
  readonly complSema: number;
}

/** A rank's mesh event tape under construction, with the DMA set its legs drive. */
export class MeshProgram {
  readonly dma: EncdChannel;
  readonly leg: DmaLeg;
  /** The mesh type (enc_alg_mesh_type) of the op being composed: its cc_op_entry's algo_sub_type. */
  meshType: EncAlgMeshType = EncAlgMeshType.FULL_MESH;
  private readonly push: (e: MeshEvent) => void;
  constructor(dma: EncdChannel, leg: DmaLeg, push: (e: MeshEvent) => void) {
    this.dma = dma;
    this.leg = leg;
    this.push = push;
  }

  /**
   * One event: optional wait (semaphore READ address >= waitVal), optional DMA leg (the descriptors
   * emitted on `dma` since the last leg become one step), optional direct semaphore triggers.
   */
  event(type: number, o: { wait?: { sema: number; value: number }; dma?: boolean; direct?: readonly number[] } = {}): void {
    if (o.dma) this.dma.markStep(0);
    const direct = o.direct ?? [];
    if (direct.length > 3) throw new InternalError(`a mesh event has 3 direct triggers, not ${direct.length}`);
    this.push({
      legs: [o.dma ? this.leg : NO_LEG, NO_LEG],
      directTrigger: [direct[0] ?? 0, direct[1] ?? 0, direct[2] ?? 0],
      waitSema: o.wait?.sema ?? 0,
      waitVal: o.wait?.value ?? 0,
      eventType: type,
      dmaTrigger: o.dma ?? false,
      directTriggerOn: direct.length > 0,
      waitEvent: o.wait !== undefined,
    });
  }
}
