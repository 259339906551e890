; Inno Setup 6 script: a per-user installer for the PyInstaller build in dist\deskhand\.
;
;   pyinstaller --noconfirm --clean build.spec
;   "%ProgramFiles(x86)%\Inno Setup 6\ISCC.exe" installers\windows\deskhand.iss
;     → dist\deskhand-<version>-windows-x64-setup.exe
;
; Overrides: ISCC /DSourceDir=C:\path\to\dist\deskhand /DAppVersion=1.2.3 /DOutputDir=C:\out deskhand.iss
;
; No administrator rights: the app goes to %LOCALAPPDATA%\Programs\Deskhand, the shortcuts to the user's Start
; menu and desktop, the optional autostart to HKCU\...\Run, the uninstaller to Settings › Apps. Deskhand's own
; settings, runs and models (%APPDATA%\Deskhand, %LOCALAPPDATA%\Deskhand) are kept when it is uninstalled.

#define AppName "Deskhand"
#define AppExe "deskhand.exe"
#ifndef SourceDir
  #define SourceDir AddBackslash(SourcePath) + "..\..\dist\deskhand"
#endif
#ifndef OutputDir
  #define OutputDir AddBackslash(SourcePath) + "..\..\dist"
#endif
#ifndef AppVersion
  ; build.spec writes the version into the executable's version resource
  #define AppVersion GetStringFileInfo(SourceDir + "\" + AppExe, "ProductVersion")
#endif
#if AppVersion == ""
  #error Could not read the version of dist\deskhand\deskhand.exe: build it with build.spec first, or pass /DAppVersion=X.Y.Z
#endif

[Setup]
; AppId identifies Deskhand across versions (upgrades, the uninstaller): never change it.
AppId={{02A573BB-A71F-4DBC-A3A4-9502AFE41391}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=Deskhand
AppComments=Operates your computer with a local vision-language model, one approved step at a time.
VersionInfoVersion={#AppVersion}
VersionInfoDescription={#AppName} {#AppVersion} Setup
; Per-user install: no UAC prompt; {autopf} is %LOCALAPPDATA%\Programs in this mode.
PrivilegesRequired=lowest
DefaultDirName={autopf}\{#AppName}
DisableProgramGroupPage=yes
DisableDirPage=auto
UsePreviousAppDir=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
; Qt 6 needs Windows 10 1809 or newer
MinVersion=10.0.17763
OutputDir={#OutputDir}
OutputBaseFilename=deskhand-{#AppVersion}-windows-x64-setup
SetupIconFile={#SourceDir}\_internal\resources\icons\deskhand.ico
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName}
WizardStyle=modern
Compression=lzma2
SolidCompression=yes
; Ask a running Deskhand to close (Restart Manager) before files are replaced or removed.
CloseApplications=yes
RestartApplications=no
ChangesAssociations=no

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "autostart"; Description: "Start Deskhand when I sign in to Windows"; GroupDescription: "Startup:"; Flags: unchecked

[InstallDelete]
; An upgrade replaces the whole bundle: no stale DLLs or Python modules from an earlier version stay behind.
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"; Comment: "Deskhand desktop assistant"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"; Tasks: desktopicon

[Registry]
Root: HKCU; Subkey: "Software\Microsoft\Windows\CurrentVersion\Run"; ValueType: string; ValueName: "{#AppName}"; ValueData: """{app}\{#AppExe}"""; Flags: uninsdeletevalue; Tasks: autostart
; Reinstalled without the task: the earlier autostart goes away.
Root: HKCU; Subkey: "Software\Microsoft\Windows\CurrentVersion\Run"; ValueType: none; ValueName: "{#AppName}"; Flags: deletevalue; Tasks: not autostart

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

[UninstallDelete]
; Bytecode or logs written next to the app; the user's data lives elsewhere and is kept.
Type: filesandordirs; Name: "{app}\_internal"
Type: dirifempty; Name: "{app}"
