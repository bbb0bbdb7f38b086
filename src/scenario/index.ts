// Scenario and device-preset validation: JSON in, typed ir objects out.
export { parseScenario, MAX_RANKS, MAX_STREAMS, PRIORITY_CLASSES } from "./scenario.ts";
export { parseDeviceSpec, MAX_DEVICES } from "./device.ts";
export { parseJson, Reader } from "./reader.ts";
