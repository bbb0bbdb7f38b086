// Scenario and device-preset validation: JSON in, typed ir objects out.
export { parseScenario } from "./scenario.ts";
export { parseDeviceSpec } from "./device.ts";
export { parseJson } from "./reader.ts";
